// Test-only: prints, as one JSON object, the SM_* variables and the world that
// mrcnn_common derives from a base dir and this process's environment, so the
// pytest oracle can compare them with the public sagemaker-training toolkit.
//   print_training_env [--base-dir DIR] [--entry-point NAME]
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/config_error.h"
#include "common/training_env.h"

int main(int argc, char** argv) {
  using namespace mrcnn::common;
  std::optional<std::string> base_flag;
  std::string entry_point;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--base-dir") {
      base_flag = argv[i + 1];
    } else if (flag == "--entry-point") {
      entry_point = argv[i + 1];
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  try {
    const EnvMap env = CurrentEnvironment();
    const auto job = LoadJobEnvironment(ResolveBaseDir(base_flag, env), env);
    const auto world = ResolveWorld(job, env, {});
    nlohmann::json out;
    out["sm"] = TrainingEnvironmentVariables(job, world, entry_point);
    out["argv"] = job.hyperparameters.UserArgv();
    out["world"] = {{"launcher", std::string(LauncherName(world.launcher))},
                    {"node_rank", world.node_rank},
                    {"nnodes", world.nnodes},
                    {"nproc_per_node", world.nproc_per_node},
                    {"master_addr", world.master_addr},
                    {"master_port", world.master_port}};
    std::cout << out.dump() << "\n";
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
