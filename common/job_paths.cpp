#include "common/job_paths.h"

namespace mrcnn::common {

JobPaths MakeJobPaths(const std::filesystem::path& base) {
  JobPaths p;
  p.base = base;
  p.input = base / "input";
  p.input_config = p.input / "config";
  p.input_data = p.input / "data";
  p.model = base / "model";
  p.output = base / "output";
  p.output_data = p.output / "data";
  p.output_intermediate = p.output / "intermediate";
  p.failure = p.output / "failure";
  p.code = base / "code";
  p.checkpoints = base / "checkpoints";
  return p;
}

std::filesystem::path ResolveBaseDir(const std::optional<std::string>& flag, const EnvMap& env) {
  if (flag && !flag->empty())
    return *flag;
  if (auto from_env = Lookup(env, "SAGEMAKER_BASE_DIR"); from_env && !from_env->empty())
    return *from_env;
  return "/opt/ml";
}

ResolvedModelDir ResolveModelDir(const std::optional<std::string>& model_dir_flag,
                                 const std::optional<std::string>& base_dir_flag,
                                 const EnvMap& env) {
  if (model_dir_flag && !model_dir_flag->empty())
    return {*model_dir_flag, "--model-dir"};
  if (auto from_env = Lookup(env, "SM_MODEL_DIR"); from_env && !from_env->empty())
    return {*from_env, "SM_MODEL_DIR"};
  const auto base = ResolveBaseDir(base_dir_flag, env);
  std::string source = "the default base dir /opt/ml";
  if (base_dir_flag && !base_dir_flag->empty()) {
    source = "--base-dir " + *base_dir_flag;
  } else if (auto from_env = Lookup(env, "SAGEMAKER_BASE_DIR"); from_env && !from_env->empty()) {
    source = "SAGEMAKER_BASE_DIR=" + *from_env;
  }
  return {MakeJobPaths(base).model, source};
}

}  // namespace mrcnn::common
