// SM_* variables, reproducing sagemaker_training.environment.Environment.to_env_vars
// (sagemaker-training 5.x): the same keys, the same values, the same encodings.
#include "common/training_env.h"

#include <algorithm>
#include <cctype>

#include "common/python_encoding.h"

namespace mrcnn::common {
namespace {

using nlohmann::json;

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

json NullIfEmpty(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

bool Truthy(const json& v) {
  if (v.is_null())
    return false;
  if (v.is_boolean())
    return v.get<bool>();
  if (v.is_number())
    return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object())
    return !v.empty();
  return false;
}

std::vector<std::string> DistributionInstanceGroups(const json& framework_params,
                                                    const ResourceConfig& rc) {
  if (const auto it = framework_params.find("sagemaker_distribution_instance_groups");
      it != framework_params.end()) {
    std::vector<std::string> groups;
    if (it->is_array()) {
      for (const auto& g : *it)
        groups.push_back(g.is_string() ? g.get<std::string>() : PythonStr(g));
    }
    return groups;
  }
  static const char* const kDistributionFlags[] = {
      "sagemaker_mpi_enabled",
      "sagemaker_parameter_server_enabled",
      "sagemaker_distributed_dataparallel_enabled",
      "sagemaker_pytorch_ddp_enabled",
      "sagemaker_pytorch_xla_multi_worker_enabled",
      "sagemaker_multi_worker_mirrored_strategy_enabled",
      "sagemaker_torch_distributed_enabled",
  };
  for (const char* flag : kDistributionFlags) {
    if (const auto it = framework_params.find(flag); it != framework_params.end() && Truthy(*it)) {
      return {rc.current_group_name};
    }
  }
  return {};
}

}  // namespace

EnvMap TrainingEnvironmentVariables(const JobEnvironment& job, const World& world,
                                    const std::string& user_entry_point) {
  (void)world;  // SM_* describe the SageMaker job, not the launcher's world
  const auto& paths = job.paths;
  const auto& rc = job.resources;
  const json& all_framework = job.hyperparameters.framework;

  // SM_FRAMEWORK_PARAMS leaves out the toolkit's own keys (params.SAGEMAKER_HYPERPARAMETERS).
  static const char* const kToolkitKeys[] = {
      "sagemaker_program",
      "sagemaker_submit_directory",
      "sagemaker_enable_cloudwatch_metrics",
      "sagemaker_region",
      "sagemaker_container_log_level",
      "sagemaker_job_name",
      "default_user_module_name",
      "_tuning_objective_metric",
      "sagemaker_s3_output",
  };
  json framework_params = json::object();
  // No structured binding here: clang 14 (the sanitizer builds) cannot capture one.
  for (const auto& item : all_framework.items()) {
    if (std::none_of(std::begin(kToolkitKeys), std::end(kToolkitKeys),
                     [&](const char* k) { return item.key() == k; })) {
      framework_params[item.key()] = item.value();
    }
  }

  json log_level = 20;  // logging.INFO
  if (const auto it = all_framework.find("sagemaker_container_log_level");
      it != all_framework.end())
    log_level = *it;
  std::string module_dir = paths.code.string();
  if (const auto it = all_framework.find("sagemaker_submit_directory"); it != all_framework.end()) {
    module_dir = PythonStr(*it);
  }
  // str(None) when no program is named: the toolkit really exports "None".
  std::string module_name = user_entry_point.empty() ? "None" : user_entry_point;
  if (module_name.ends_with(".py"))
    module_name.resize(module_name.size() - 3);

  json channel_dirs = json::object();
  json channels = json::array();
  for (const auto& ch : job.channels) {
    channel_dirs[ch.name] = ch.dir.string();
    channels.push_back(ch.name);
  }
  const json& input_data_config = job.input_data_config;

  json instance_groups = json::array();
  json instance_groups_dict = json::object();
  json current_group_hosts = json::array();
  if (const auto it = rc.raw.find("instance_groups"); it != rc.raw.end() && it->is_array()) {
    for (const auto& g : *it) {
      const std::string name = g.value("instance_group_name", "");
      instance_groups.push_back(name);
      instance_groups_dict[name] = g;
      if (name == rc.current_group_name && current_group_hosts.empty())
        current_group_hosts = g.value("hosts", json::array());
    }
  }
  const auto distribution_groups = DistributionInstanceGroups(framework_params, rc);
  json distribution_hosts = json::array();
  if (const auto it = rc.raw.find("instance_groups");
      it != rc.raw.end() && it->is_array() && !it->empty()) {
    // Group order as written, not sorted: the toolkit's master_hostname is the first entry.
    for (const auto& g : *it) {
      const std::string name = g.value("instance_group_name", "");
      if (std::find(distribution_groups.begin(), distribution_groups.end(), name) !=
          distribution_groups.end()) {
        for (const auto& h : g.at("hosts"))
          distribution_hosts.push_back(h);
      }
    }
  } else {
    distribution_hosts = rc.hosts;
  }
  const std::string master_hostname =
      distribution_hosts.empty() ? rc.hosts.front() : distribution_hosts.front().get<std::string>();
  json topology = rc.raw.contains("topology") ? rc.raw["topology"] : json::array();

  json is_modelparallel_enabled = nullptr;  // Python: mp and mp != "{}"
  if (const auto& mp = job.model_parallel_parameters) {
    is_modelparallel_enabled = mp->empty() ? json("") : json(*mp != "{}");
  }
  const auto& framework_module = job.framework_module;

  json training_env = {
      {"additional_framework_parameters", framework_params},
      {"channel_input_dirs", channel_dirs},
      {"current_host", rc.current_host},
      {"current_instance_group", rc.current_group_name},
      {"current_instance_group_hosts", current_group_hosts},
      {"current_instance_type", rc.current_instance_type},
      {"distribution_hosts", distribution_hosts},
      {"distribution_instance_groups", distribution_groups},
      {"framework_module", framework_module ? json(*framework_module) : json(nullptr)},
      {"hosts", rc.hosts},
      {"hyperparameters", job.hyperparameters.user},
      {"input_config_dir", paths.input_config.string()},
      {"input_data_config", input_data_config},
      {"input_dir", paths.input.string()},
      {"instance_groups", instance_groups},
      {"instance_groups_dict", instance_groups_dict},
      {"is_hetero", instance_groups.size() > 1},
      {"is_master", rc.current_host == master_hostname},
      {"is_modelparallel_enabled", is_modelparallel_enabled},
      {"is_smddpmprun_installed", job.smddpmprun_installed},
      {"is_smddprun_installed", job.smddprun_installed},
      {"job_name", NullIfEmpty(job.job_name)},
      {"log_level", log_level},
      {"master_hostname", master_hostname},
      {"model_dir", paths.model.string()},
      {"module_dir", module_dir},
      {"module_name", module_name},
      {"network_interface_name", rc.network_interface_name},
      {"num_cpus", job.num_cpus},
      {"num_gpus", job.num_gpus},
      {"num_neurons", 0},
      {"output_data_dir", paths.output_data.string()},
      {"output_dir", paths.output.string()},
      {"output_intermediate_dir", paths.output_intermediate.string()},
      {"resource_config", rc.raw},
      {"topology", topology},
      {"user_entry_point", NullIfEmpty(user_entry_point)},
  };

  json user_args = job.hyperparameters.UserArgv();
  json env = {
      {"hosts", rc.hosts},
      {"network_interface_name", rc.network_interface_name},
      {"hps", job.hyperparameters.user},
      {"user_entry_point", NullIfEmpty(user_entry_point)},
      {"framework_params", framework_params},
      {"resource_config", rc.raw},
      {"input_data_config", input_data_config},
      {"output_data_dir", paths.output_data.string()},
      {"channels", channels},
      {"current_host", rc.current_host},
      {"current_instance_type", rc.current_instance_type},
      {"current_instance_group", rc.current_group_name},
      {"current_instance_group_hosts", current_group_hosts},
      {"instance_groups", instance_groups},
      {"instance_groups_dict", instance_groups_dict},
      {"distribution_instance_groups", distribution_groups},
      {"is_hetero", instance_groups.size() > 1},
      {"module_name", module_name},
      {"log_level", log_level},
      {"framework_module", training_env["framework_module"]},
      {"input_dir", paths.input.string()},
      {"input_config_dir", paths.input_config.string()},
      {"output_dir", paths.output.string()},
      {"num_cpus", job.num_cpus},
      {"num_gpus", job.num_gpus},
      {"num_neurons", 0},
      {"model_dir", paths.model.string()},
      {"module_dir", module_dir},
      {"training_env", training_env},
      {"user_args", user_args},
      {"output_intermediate_dir", paths.output_intermediate.string()},
  };
  if (!topology.empty())
    env["topology"] = topology;

  EnvMap out;
  for (const auto& [key, value] : env.items())
    out["SM_" + Upper(key)] = PythonEnvValue(value);
  for (const auto& [name, dir] : channel_dirs.items())
    out["SM_CHANNEL_" + Upper(name)] = dir.get<std::string>();
  for (const auto& [key, value] : job.hyperparameters.user.items())
    out["SM_HP_" + Upper(key)] = PythonEnvValue(value);
  return out;
}

}  // namespace mrcnn::common
