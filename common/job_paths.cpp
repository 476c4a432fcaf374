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

}  // namespace mrcnn::common
