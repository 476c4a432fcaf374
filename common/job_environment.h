#pragma once
// Everything the job's files and environment say, read once at startup.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/checkpoint_config.h"
#include "common/env_map.h"
#include "common/hyperparameters.h"
#include "common/input_data_config.h"
#include "common/job_paths.h"
#include "common/resource_config.h"

namespace mrcnn::common {

struct JobEnvironment {
  JobPaths paths;
  Hyperparameters hyperparameters;
  ResourceConfig resources;
  std::vector<Channel> channels;
  CheckpointConfig checkpoint;
  std::string job_name;  // TRAINING_JOB_NAME
  int num_cpus = 1;
  int num_gpus = 0;
  std::string log_level = "20";  // sagemaker_container_log_level, as the toolkit encodes it
  nlohmann::json input_data_config =
      nlohmann::json::object();  // inputdataconfig.json as written ({} when absent)

  // Environment facts the public toolkit reports in SM_TRAINING_ENV, read here
  // so TrainingEnvironmentVariables stays a pure function of this struct.
  std::optional<std::string> framework_module;           // SAGEMAKER_TRAINING_MODULE
  std::optional<std::string> model_parallel_parameters;  // SM_HP_MP_PARAMETERS
  bool smddprun_installed = false;                       // executable on PATH
  bool smddpmprun_installed = false;
};

// Reads every config file under base_dir/input/config. Throws ConfigError.
// Local runs may omit every file. When resourceconfig.json is present the tree
// claims to be SageMaker's, which always writes hyperparameters.json and
// inputdataconfig.json too (the public toolkit cannot start without them), so
// their absence is then a ConfigError.
JobEnvironment LoadJobEnvironment(const std::filesystem::path& base_dir, const EnvMap& env);

// GPUs visible to this container without touching the CUDA runtime:
// NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES ("all", "none", "void", "",
// "0,1", UUID lists), else the number of /dev/nvidia[0-9]* device files.
// CUDA_VISIBLE_DEVICES counts its entries up to the first invalid one, as CUDA
// does ("" = none); NVIDIA_VISIBLE_DEVICES "all" counts device files, "none",
// "void" and "" mean none, a list counts its entries.
int CountGpus(const EnvMap& env);
// The same with the device directory given (tests use a temp dir for /dev).
int CountGpus(const EnvMap& env, const std::filesystem::path& dev_dir);

}  // namespace mrcnn::common
