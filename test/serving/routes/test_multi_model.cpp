// Integration tests: a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true) as SageMaker drives
// it, against a real server process on loopback, with statistics-predictor model dirs whose
// class names say which model answered.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>

#include "test/serving/server_process.h"
#include "test/serving/test_images.h"

using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class ModelDirs {
 public:
  ModelDirs() {
    std::string pattern = (fs::temp_directory_path() / "mme-models-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
  }
  ~ModelDirs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // A model dir whose detections are labelled "<name>-red/green/blue", charged about
  // `padding` bytes (with MRCNN_MME_WORKSPACE_MB=0 and one worker).
  std::string Add(const std::string& name, size_t padding = 0, json extra = json::object()) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    extra["class_names"] = {name + "-red", name + "-green", name + "-blue"};
    std::ofstream(dir / "statistics_predictor.json") << extra.dump();
    if (padding > 0)
      std::ofstream(dir / "padding.bin") << std::string(padding, 'x');
    return dir.string();
  }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

const std::map<std::string, std::string> kPngHeaders = {{"Content-Type", "image/png"}};

// A green rectangle the statistics predictor finds as one "<model>-green" detection.
std::string GreenRectanglePng() {
  return AsString(Encode(CanvasWithRectangle(40, 30, 2, 2, 12, 10, 0, 255, 0), ".png"));
}

HttpReply LoadModel(uint16_t port, const std::string& name, const std::string& url) {
  return Request(port, "POST", "/models", json{{"model_name", name}, {"url", url}}.dump(),
                 {{"Content-Type", "application/json"}});
}

// The label of the one detection /models/{name}/invoke answers with.
std::string InvokeLabel(uint16_t port, const std::string& name) {
  const HttpReply reply =
      Request(port, "POST", "/models/" + name + "/invoke", GreenRectanglePng(), kPngHeaders);
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  const json body = json::parse(reply.body);
  REQUIRE(body["detections"].size() == 1);
  return body["detections"][0]["label"];
}

std::map<std::string, std::string> MultiModelEnv(const std::string& budget_mb = "") {
  std::map<std::string, std::string> env = {{"SAGEMAKER_MULTI_MODEL", "True"},
                                            {"MRCNN_MME_WORKSPACE_MB", "0"}};
  if (!budget_mb.empty())
    env["MRCNN_MME_MEMORY_BUDGET_MB"] = budget_mb;
  return env;
}

}  // namespace

TEST_CASE("multi-model: load, duplicate 409, invoke, unknown 404, list, describe, delete",
          "[serving][http][mme]") {
  ModelDirs dirs;
  ServerProcess server({}, json::object(), MultiModelEnv());
  server.WaitUntilReady();  // no model at all, and /ping is 200
  const uint16_t port = server.port();

  const HttpReply loaded = LoadModel(port, "site-a", dirs.Add("site-a"));
  INFO(loaded.body);
  REQUIRE(loaded.status == 200);
  CHECK(json::parse(loaded.body)["modelName"] == "site-a");
  const HttpReply again = LoadModel(port, "site-a", dirs.Add("site-a-copy"));
  CHECK(again.status == 409);
  CHECK(json::parse(again.body)["error"] == "model_already_loaded");
  REQUIRE(LoadModel(port, "site-b", dirs.Add("site-b")).status == 200);

  CHECK(InvokeLabel(port, "site-a") == "site-a-green");
  CHECK(InvokeLabel(port, "site-b") == "site-b-green");
  // The target-model header is only logged; the path decides.
  const HttpReply with_header =
      Request(port, "POST", "/models/site-a/invoke", GreenRectanglePng(),
              {{"Content-Type", "image/png"}, {"X-Amzn-SageMaker-Target-Model", "site-b.tar.gz"}});
  CHECK(json::parse(with_header.body)["detections"][0]["label"] == "site-a-green");
  const HttpReply unknown =
      Request(port, "POST", "/models/nobody/invoke", GreenRectanglePng(), kPngHeaders);
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body)["error"] == "model_not_found");
  // /invocations names no model on a multi-model endpoint.
  CHECK(Request(port, "POST", "/invocations", GreenRectanglePng(), kPngHeaders).status == 400);

  // Listing, one model per page.
  std::vector<std::string> listed;
  std::string token;
  for (int page = 0; page < 5; ++page) {
    const std::string target =
        "/models?limit=1" + (token.empty() ? "" : "&next_page_token=" + token);
    const json body = json::parse(Request(port, "GET", target).body);
    for (const auto& model : body["models"])
      listed.push_back(model["modelName"]);
    if (!body.contains("nextPageToken"))
      break;
    token = body["nextPageToken"];
  }
  CHECK(listed == std::vector<std::string>{"site-a", "site-b"});
  const json all = json::parse(Request(port, "GET", "/models").body);
  CHECK(all["models"].size() == 2);
  CHECK_FALSE(all.contains("nextPageToken"));
  CHECK(Request(port, "GET", "/models?limit=0").status == 400);

  const HttpReply described = Request(port, "GET", "/models/site-b");
  CHECK(described.status == 200);
  CHECK(json::parse(described.body)["modelUrl"] == (dirs.root() / "site-b").string());

  CHECK(Request(port, "DELETE", "/models/site-a").status == 200);
  CHECK(Request(port, "GET", "/models/site-a").status == 404);
  CHECK(Request(port, "DELETE", "/models/site-a").status == 404);
  CHECK(Request(port, "POST", "/models/site-a/invoke", GreenRectanglePng(), kPngHeaders).status ==
        404);
  CHECK(InvokeLabel(port, "site-b") == "site-b-green");

  // Bad loads: no such dir, a model that fails to load, a body that is not the contract's.
  const HttpReply missing = LoadModel(port, "ghost", (dirs.root() / "nowhere").string());
  CHECK(missing.status == 404);
  CHECK(json::parse(missing.body)["error"] == "model_dir_not_found");
  const HttpReply broken = LoadModel(port, "broken", dirs.Add("broken", 0, {{"fail_load", true}}));
  CHECK(broken.status == 400);
  CHECK(json::parse(broken.body)["error"] == "bad_model");
  CHECK(Request(port, "GET", "/models/broken").status == 404);
  const HttpReply not_json =
      Request(port, "POST", "/models", "{model_name: x", {{"Content-Type", "application/json"}});
  CHECK(not_json.status == 400);
  const HttpReply slash =
      Request(port, "POST", "/models", json{{"model_name", "a/b"}, {"url", "/tmp"}}.dump(),
              {{"Content-Type", "application/json"}});
  CHECK(slash.status == 400);
  CHECK(Request(port, "GET", "/ping").status == 200);
}

TEST_CASE("multi-model: 5 models under a budget for 2, round robin, LRU evictions, then 507",
          "[serving][http][mme]") {
  ModelDirs dirs;
  // 1 MiB budget; each model about 0.4 MiB: two fit, a third does not.
  ServerProcess server({}, json::object(), MultiModelEnv("1"));
  server.WaitUntilReady();
  const uint16_t port = server.port();
  std::vector<std::string> urls;
  for (int i = 0; i < 5; ++i)
    urls.push_back(dirs.Add(fmt::format("m{}", i), 400 << 10));
  int loads = 0;
  std::set<std::string> evicted;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      const std::string name = fmt::format("m{}", i);
      // As SageMaker does: invoke; on 404 load, then invoke again.
      HttpReply reply =
          Request(port, "POST", "/models/" + name + "/invoke", GreenRectanglePng(), kPngHeaders);
      if (reply.status == 404) {
        const HttpReply load = LoadModel(port, name, urls[static_cast<size_t>(i)]);
        INFO(load.body);
        REQUIRE(load.status == 200);
        ++loads;
        const json answer = json::parse(load.body);
        for (const auto& gone : answer["evicted"])
          evicted.insert(gone.get<std::string>());
        reply =
            Request(port, "POST", "/models/" + name + "/invoke", GreenRectanglePng(), kPngHeaders);
      }
      INFO(reply.body);
      REQUIRE(reply.status == 200);
      CHECK(json::parse(reply.body)["detections"][0]["label"] == name + "-green");
      CHECK(json::parse(Request(port, "GET", "/models").body)["models"].size() <= 2);
    }
  }
  CHECK(loads == 15);  // round robin over 5 with room for 2: every invoke needed a load
  CHECK(evicted.size() == 5);
  const std::string log = server.Log();
  size_t evictions = 0;
  for (size_t at = log.find("least recently used; evicted"); at != std::string::npos;
       at = log.find("least recently used; evicted", at + 1)) {
    ++evictions;
  }
  CHECK(evictions == 13);

  const HttpReply too_big = LoadModel(port, "huge", dirs.Add("huge", 3 << 20));
  INFO(too_big.body);
  CHECK(too_big.status == 507);
  CHECK(json::parse(too_big.body)["error"] == "insufficient_memory");
  CHECK(json::parse(Request(port, "GET", "/models").body)["models"].size() == 2);  // kept
}

TEST_CASE(
    "multi-model: different models run in parallel, and unloading waits for in-flight requests",
    "[serving][http][mme]") {
  ModelDirs dirs;
  ServerProcess server({}, json::object(), MultiModelEnv());
  server.WaitUntilReady();
  const uint16_t port = server.port();
  REQUIRE(LoadModel(port, "slow", dirs.Add("slow", 0, {{"image_delay_ms", 1500}})).status == 200);
  REQUIRE(LoadModel(port, "fast", dirs.Add("fast")).status == 200);

  const auto start = std::chrono::steady_clock::now();
  auto slow = std::async(std::launch::async, [port] {
    return Request(port, "POST", "/models/slow/invoke", GreenRectanglePng(), kPngHeaders);
  });
  std::this_thread::sleep_for(200ms);  // the slow model is busy now
  CHECK(InvokeLabel(port, "fast") == "fast-green");
  const auto fast_done = std::chrono::steady_clock::now() - start;
  CHECK(fast_done < 1200ms);  // not queued behind the slow model

  // DELETE while the slow request runs: answered only after that request.
  auto unload = std::async(std::launch::async, [port] {
    const HttpReply reply = Request(port, "DELETE", "/models/slow");
    return std::make_pair(reply.status, std::chrono::steady_clock::now());
  });
  const HttpReply slow_reply = slow.get();
  const auto slow_done = std::chrono::steady_clock::now();
  INFO(slow_reply.body);
  CHECK(slow_reply.status == 200);
  CHECK(json::parse(slow_reply.body)["detections"][0]["label"] == "slow-green");
  const auto [unload_status, unload_done] = unload.get();
  CHECK(unload_status == 200);
  CHECK(unload_done >= slow_done - 50ms);
  CHECK(Request(port, "GET", "/models/slow").status == 404);
}
