// libFuzzer target over the job's config files and the launcher's environment, through
// everything `entrypoint train` decides from them (MakeLaunchPlan: the job environment, the
// world, the program, each child's SM_* and torchrun variables) and the argv the user's
// hyperparameters become. The input's parts (fuzz_input_parts.h) are, in order,
// hyperparameters.json, resourceconfig.json, inputdataconfig.json, checkpointconfig.json
// (a missing part or one reading "<absent>" is an absent file) and the environment as
// KEY=VALUE lines. ConfigError is the expected rejection; any other exception, a crash, a
// sanitizer report or a plan that breaks the world's invariants is a finding.
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "common/config_error.h"
#include "entrypoint/launch_plan.h"
#include "test/common/job_tree.h"
#include "test/fuzz/fuzz_input_parts.h"

namespace {

namespace fs = std::filesystem;
using namespace mrcnn;

constexpr std::array<const char*, 4> kConfigFiles = {
    "hyperparameters.json", "resourceconfig.json", "inputdataconfig.json", "checkpointconfig.json"};

// One /opt/ml-like tree per process, rewritten for every input. A static, so its destructor
// removes it when libFuzzer ends with exit(0); an std::atexit callback registered while the
// static was made ran after the static was destroyed, and every run left its folder.
const fs::path& BaseDir() {
  static const common::testing::JobTree tree;
  [[maybe_unused]] static const bool data_made = (tree.MakeDir("input/data/train"), true);
  return tree.base();
}

void WriteOrRemove(const fs::path& file, const std::string_view* part) {
  if (part == nullptr || *part == "<absent>") {
    fs::remove(file);
    return;
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(part->data(), static_cast<std::streamsize>(part->size()));
}

common::EnvMap ParseEnvironment(std::string_view text) {
  common::EnvMap env;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    const size_t equals = line.find('=');
    if (equals != std::string_view::npos) {
      env[std::string(line.substr(0, equals))] = std::string(line.substr(equals + 1));
    }
    if (newline == std::string_view::npos)
      break;
    text.remove_prefix(newline + 1);
  }
  return env;
}

void CheckPlan(const entrypoint::LaunchPlan& plan) {
  const common::World& world = plan.world;
  const bool valid_world = world.nnodes >= 1 && world.node_rank >= 0 &&
                           world.node_rank < world.nnodes && world.nproc_per_node >= 1 &&
                           world.master_port >= 1 && world.master_port <= 65535;
  const size_t expected_children =
      world.launched_local_rank ? 1 : static_cast<size_t>(world.nproc_per_node);
  if (!valid_world || plan.children.size() != expected_children || plan.grace.count() < 0 ||
      plan.peer_timeout.count() < 0 || plan.program.argv.empty()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = fuzz::SplitFuzzInput(data, size);
  const fs::path config_dir = BaseDir() / "input" / "config";
  for (size_t i = 0; i < kConfigFiles.size(); ++i) {
    WriteOrRemove(config_dir / kConfigFiles[i], i < parts.size() ? &parts[i] : nullptr);
  }
  const common::EnvMap env = parts.size() > kConfigFiles.size()
                                 ? ParseEnvironment(parts[kConfigFiles.size()])
                                 : common::EnvMap{};
  entrypoint::TrainOptions options;
  options.base_dir = BaseDir().string();
  options.trainer = "/nonexistent/trainer";  // the plan names it; nothing is started
  try {
    const entrypoint::LaunchPlan plan = entrypoint::MakeLaunchPlan(options, env);
    CheckPlan(plan);
    for (const auto& child : plan.children) {
      entrypoint::ChildEnvironment(env, child);
    }
  } catch (const common::ConfigError&) {
  }
  return 0;
}
