// libFuzzer target over the training config as `trainer train` builds it: a YAML config file
// (with `_BASE_` inheritance) over the defaults, then the "opts" string, then the config's
// own YAML rendering read back. The input's parts (fuzz_input_parts.h) are config.yaml,
// base.yaml (what a `_BASE_: base.yaml` names), the opts string, and the trainer's argv
// (one argument per line). ConfigError is the expected rejection; any other exception, a
// crash, a sanitizer report, or a config whose ToYaml() does not read back equal (the
// promise of config.h) is a finding.
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/config_error.h"
#include "test/common/job_tree.h"
#include "test/fuzz/fuzz_input_parts.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/config/job_config.h"

namespace {

namespace fs = std::filesystem;
using namespace mrcnn;

// The folder config.yaml and base.yaml are written to: a throwaway tree's input/config, a
// static so that its destructor removes the tree at exit (as in fuzz_job_config.cpp).
const fs::path& ConfigDir() {
  static const common::testing::JobTree tree;
  static const fs::path dir = tree.base() / "input" / "config";
  return dir;
}

void Write(const fs::path& file, std::string_view text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    lines.emplace_back(text.substr(0, newline));
    if (newline == std::string_view::npos)
      break;
    text.remove_prefix(newline + 1);
  }
  return lines;
}

// NaN is a value a config may hold (".nan"), and it never compares equal to itself.
bool HasNan(const engine::TrainConfig& config) {
  for (const auto& [key, value] : config.values()) {
    if (const double* d = std::get_if<double>(&value); d != nullptr && std::isnan(*d))
      return true;
    if (const auto* list = std::get_if<engine::FloatList>(&value)) {
      for (double x : *list) {
        if (std::isnan(x))
          return true;
      }
    }
    if (const auto* lists = std::get_if<engine::FloatListList>(&value)) {
      for (const auto& list : *lists) {
        for (double x : list) {
          if (std::isnan(x))
            return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = fuzz::SplitFuzzInput(data, size);
  const fs::path config_file = ConfigDir() / "config.yaml";
  Write(config_file, parts[0]);
  Write(ConfigDir() / "base.yaml", parts.size() > 1 ? parts[1] : std::string_view());
  try {
    engine::TrainConfig config = engine::TrainConfig::Defaults();
    config.MergeFile(config_file);
    if (parts.size() > 2) {
      config.MergeOpts(engine::TrainConfig::SplitOpts(std::string(parts[2])));
    }
    engine::TrainConfig back = engine::TrainConfig::Defaults();
    back.MergeYaml(YAML::Load(config.ToYaml()), "ToYaml()", ConfigDir());
    if (!(back == config) && !HasNan(config))
      std::abort();
  } catch (const common::ConfigError&) {
  }
  if (parts.size() > 3) {
    try {
      const engine::TrainJobArgs args = engine::ParseTrainJobArgs(Lines(parts[3]));
      if (args.opts)
        engine::TrainConfig::SplitOpts(*args.opts);
    } catch (const common::ConfigError&) {
    }
  }
  return 0;
}
