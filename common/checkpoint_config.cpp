#include "common/checkpoint_config.h"

#include "common/config_error.h"
#include "common/json_file.h"

namespace mrcnn::common {

CheckpointConfig ParseCheckpointConfig(const std::filesystem::path& file, const JobPaths& paths) {
  CheckpointConfig cfg;
  cfg.local_path = paths.checkpoints;
  const auto doc = ReadJsonObjectFile(file);
  if (!doc)
    return cfg;
  cfg.configured = true;
  if (auto local = OptionalString(*doc, "LocalPath", file, "LocalPath")) {
    if (local->empty())
      throw ConfigError(file.string(), "LocalPath", "is empty; expected a directory path");
    cfg.local_path = *local;
  }
  cfg.s3_uri = OptionalString(*doc, "S3Uri", file, "S3Uri").value_or("");
  return cfg;
}

}  // namespace mrcnn::common
