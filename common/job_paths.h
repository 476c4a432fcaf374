#pragma once
// The SageMaker container layout under one base directory (docs/contract.md, "Files").
#include <filesystem>
#include <optional>
#include <string>

#include "common/env_map.h"

namespace mrcnn::common {

struct JobPaths {
  std::filesystem::path base;                 // /opt/ml
  std::filesystem::path input;                // base/input
  std::filesystem::path input_config;         // base/input/config
  std::filesystem::path input_data;           // base/input/data
  std::filesystem::path model;                // base/model
  std::filesystem::path output;               // base/output
  std::filesystem::path output_data;          // base/output/data
  std::filesystem::path output_intermediate;  // base/output/intermediate
  std::filesystem::path failure;              // base/output/failure
  std::filesystem::path code;                 // base/code
  std::filesystem::path checkpoints;          // base/checkpoints
};

// Pure path arithmetic: nothing is created or checked on disk.
JobPaths MakeJobPaths(const std::filesystem::path& base);

// Base dir resolution: the --base-dir flag value if given, else
// SAGEMAKER_BASE_DIR (when non-empty), else "/opt/ml".
std::filesystem::path ResolveBaseDir(const std::optional<std::string>& flag, const EnvMap& env);

struct ResolvedModelDir {
  std::filesystem::path dir;
  std::string source;  // for messages: "--model-dir", "SM_MODEL_DIR", "SAGEMAKER_BASE_DIR=/x", ...
};

// The model dir, one rule for every command: the --model-dir flag value if
// given, else SM_MODEL_DIR (when non-empty; the trainer writes there too), else
// <base>/model with the base dir of ResolveBaseDir(base_dir_flag, env).
ResolvedModelDir ResolveModelDir(const std::optional<std::string>& model_dir_flag,
                                 const std::optional<std::string>& base_dir_flag,
                                 const EnvMap& env);

}  // namespace mrcnn::common
