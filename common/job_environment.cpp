#include "common/job_environment.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <system_error>

#include "common/config_error.h"
#include "common/json_file.h"
#include "common/python_encoding.h"

namespace mrcnn::common {
namespace {

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos)
    return "";
  const auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

int CountDeviceFiles(const std::filesystem::path& dev_dir) {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = entry.path().filename().string();
    // nvidia0, nvidia1, ... but not nvidiactl, nvidia-uvm, nvidia-caps.
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(),
                    [](unsigned char c) { return std::isdigit(c) != 0; })) {
      ++count;
    }
  }
  return count;
}

// CUDA stops enumerating at the first entry that is empty or names no device
// (e.g. "-1"); indices, GPU-<uuid> and MIG-<uuid> entries count.
int CountCudaVisibleEntries(const std::string& value) {
  int count = 0;
  size_t start = 0;
  while (start <= value.size()) {
    const auto comma = value.find(',', start);
    const std::string entry =
        Trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (entry.empty() || entry.front() == '-')
      break;
    const bool is_index = std::all_of(entry.begin(), entry.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!is_index && !entry.starts_with("GPU-") && !entry.starts_with("MIG-"))
      break;
    ++count;
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return count;
}

int CountListEntries(const std::string& value) {
  int count = 0;
  size_t start = 0;
  while (true) {
    const auto comma = value.find(',', start);
    if (!Trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start))
             .empty())
      ++count;
    if (comma == std::string::npos)
      return count;
    start = comma + 1;
  }
}

void RequireFile(const std::filesystem::path& file, const std::filesystem::path& because_of) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    throw ConfigError(file.string(), "",
                      "is missing although " + because_of.filename().string() +
                          " is present (SageMaker always writes both); create it, e.g. with {}");
  }
}

// The public toolkit checks `which <program>`; an executable of that name on PATH is the same test.
bool OnPath(const EnvMap& env, const std::string& program) {
  const auto path = Lookup(env, "PATH");
  if (!path)
    return false;
  std::stringstream dirs(*path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty())
      continue;
    const auto candidate = std::filesystem::path(dir) / program;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
      return true;
  }
  return false;
}

}  // namespace

int CountGpus(const EnvMap& env, const std::filesystem::path& dev_dir) {
  if (const auto cuda = Lookup(env, "CUDA_VISIBLE_DEVICES")) {
    const std::string value = Trim(*cuda);
    if (value == "all")
      return CountDeviceFiles(dev_dir);
    if (value == "none" || value == "void")
      return 0;
    return CountCudaVisibleEntries(value);
  }
  if (const auto nvidia = Lookup(env, "NVIDIA_VISIBLE_DEVICES")) {
    const std::string value = Trim(*nvidia);
    if (value == "all")
      return CountDeviceFiles(dev_dir);
    if (value.empty() || value == "none" || value == "void")
      return 0;
    return CountListEntries(value);
  }
  return CountDeviceFiles(dev_dir);
}

int CountGpus(const EnvMap& env) {
  return CountGpus(env, "/dev");
}

JobEnvironment LoadJobEnvironment(const std::filesystem::path& base_dir, const EnvMap& env) {
  JobEnvironment job;
  job.paths = MakeJobPaths(base_dir);
  const auto& config = job.paths.input_config;
  job.resources = ParseResourceConfig(config / "resourceconfig.json");
  if (job.resources.present) {
    RequireFile(config / "hyperparameters.json", config / "resourceconfig.json");
    RequireFile(config / "inputdataconfig.json", config / "resourceconfig.json");
  }
  job.hyperparameters = ParseHyperparameters(config / "hyperparameters.json");
  job.channels = ParseInputDataConfig(config / "inputdataconfig.json", job.paths.input_data);
  job.input_data_config =
      ReadJsonObjectFile(config / "inputdataconfig.json").value_or(nlohmann::json::object());
  job.checkpoint = ParseCheckpointConfig(config / "checkpointconfig.json", job.paths);
  job.job_name = Lookup(env, "TRAINING_JOB_NAME").value_or("");
  // multiprocessing.cpu_count() in the toolkit: online CPUs, not the affinity mask.
  job.num_cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  job.num_gpus = CountGpus(env);
  const auto& framework = job.hyperparameters.framework;
  if (const auto it = framework.find("sagemaker_container_log_level"); it != framework.end()) {
    job.log_level = PythonEnvValue(*it);
  }
  job.framework_module = Lookup(env, "SAGEMAKER_TRAINING_MODULE");
  job.model_parallel_parameters = Lookup(env, "SM_HP_MP_PARAMETERS");
  job.smddprun_installed = OnPath(env, "smddprun");
  job.smddpmprun_installed = OnPath(env, "smddpmprun");
  return job;
}

}  // namespace mrcnn::common
