#pragma once
// input/config/checkpointconfig.json: where SageMaker syncs checkpoints from.
#include <filesystem>
#include <string>

#include "common/job_paths.h"

namespace mrcnn::common {

struct CheckpointConfig {
  bool configured = false;  // true when the file exists
  std::filesystem::path local_path;
  std::string s3_uri;
};

// Absent file -> configured=false, local_path = paths.checkpoints.
// Present: LocalPath (default paths.checkpoints) and S3Uri; ConfigError on
// malformed JSON or wrong types.
CheckpointConfig ParseCheckpointConfig(const std::filesystem::path& file, const JobPaths& paths);

}  // namespace mrcnn::common
