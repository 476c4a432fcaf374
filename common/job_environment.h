#pragma once
// Everything the job's files and environment say, read once at startup.
#include <filesystem>
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
};

// Reads every config file under base_dir/input/config. Throws ConfigError.
JobEnvironment LoadJobEnvironment(const std::filesystem::path& base_dir, const EnvMap& env);

// GPUs visible to this container without touching the CUDA runtime:
// NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES ("all", "none", "void", "",
// "0,1", UUID lists), else the number of /dev/nvidia[0-9]* device files.
int CountGpus(const EnvMap& env);

}  // namespace mrcnn::common
