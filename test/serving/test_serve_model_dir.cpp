// `entrypoint serve` picks the model dir by the rule `train` and `env` use for the base dir:
// --model-dir, else SM_MODEL_DIR, else <base>/model with base = --base-dir, else
// SAGEMAKER_BASE_DIR, else /opt/ml. Real entrypoint and server processes on loopback; the
// model is the statistics predictor, which `--predictor auto` picks only when it finds
// statistics_predictor.json in the dir it resolved, so /ping 200 proves which dir it read.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test/serving/server_process.h"

using mrcnn::serving::testing::ServerProcess;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

class Trees {
 public:
  Trees() {
    static int counter = 0;
    root_ = fs::temp_directory_path() / ("mrcnn_serve_model_dir_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~Trees() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  Trees(const Trees&) = delete;
  Trees& operator=(const Trees&) = delete;

  // root/<relative> holding a statistics predictor; returns its path.
  fs::path Model(const std::string& relative) const {
    const fs::path dir = root_ / relative;
    fs::create_directories(dir);
    std::ofstream(dir / "statistics_predictor.json") << nlohmann::json::object().dump();
    return dir;
  }
  fs::path operator/(const std::string& relative) const { return root_ / relative; }

 private:
  fs::path root_;
};

std::vector<std::string> EntrypointServe(const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {MRCNN_ENTRYPOINT_BINARY, "serve", "--server",
                                   MRCNN_SERVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Starts `entrypoint serve`, waits for /ping 200 and returns the startup line's model dir part.
std::string ServedFrom(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env) {
  ServerProcess server(ServerProcess::Command{EntrypointServe(args)}, env);
  server.WaitUntilReady();
  const std::string log = server.Log();
  const auto from = log.find("predictor statistics from ");
  REQUIRE(from != std::string::npos);
  const auto start = from + std::string("predictor statistics from ").size();
  return log.substr(start, log.find("),", start) + 1 - start);
}

}  // namespace

TEST_CASE("entrypoint serve loads <SAGEMAKER_BASE_DIR>/model", "[serving][entrypoint]") {
  Trees trees;
  const fs::path model = trees.Model("ml/model");
  const std::string base = (trees / "ml").string();
  CHECK(ServedFrom({}, {{"SAGEMAKER_BASE_DIR", base}}) ==
        model.string() + " (SAGEMAKER_BASE_DIR=" + base + ")");
}

TEST_CASE("entrypoint serve: --model-dir, then SM_MODEL_DIR, then --base-dir, then the env",
          "[serving][entrypoint]") {
  Trees trees;
  trees.Model("env/model");
  const fs::path flag_base_model = trees.Model("flag/model");
  const fs::path sm_model = trees.Model("sm");
  const fs::path own_model = trees.Model("own");
  const std::string env_base = (trees / "env").string();
  const std::string flag_base = (trees / "flag").string();

  CHECK(ServedFrom({"--base-dir", flag_base}, {{"SAGEMAKER_BASE_DIR", env_base}}) ==
        flag_base_model.string() + " (--base-dir " + flag_base + ")");
  const std::map<std::string, std::string> with_sm = {{"SAGEMAKER_BASE_DIR", env_base},
                                                      {"SM_MODEL_DIR", sm_model.string()}};
  CHECK(ServedFrom({"--base-dir", flag_base}, with_sm) == sm_model.string() + " (SM_MODEL_DIR)");
  CHECK(ServedFrom({"--model-dir", own_model.string(), "--base-dir", flag_base}, with_sm) ==
        own_model.string() + " (--model-dir)");
}

TEST_CASE("entrypoint serve with no model under SAGEMAKER_BASE_DIR names the dir it looked in",
          "[serving][entrypoint]") {
  Trees trees;
  fs::create_directories(trees / "empty");
  const std::string base = (trees / "empty").string();
  ServerProcess server(ServerProcess::Command{EntrypointServe(), /*wait_for_port=*/false},
                       {{"SAGEMAKER_BASE_DIR", base}});
  const auto exit_status = server.WaitForExit(20s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 1);
  CHECK_THAT(server.Log(),
             Catch::Contains("model load failed: the model dir " + base +
                             "/model (from SAGEMAKER_BASE_DIR=" + base + ") is not a directory"));
  CHECK_THAT(server.Log(), !Catch::Contains("/opt/ml/model"));
}
