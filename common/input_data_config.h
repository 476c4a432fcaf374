#pragma once
// input/config/inputdataconfig.json and the channel directories under input/data.
#include <filesystem>
#include <string>
#include <vector>

namespace mrcnn::common {

enum class InputMode { kFile, kFastFile, kPipe };

struct Channel {
  std::string name;
  std::filesystem::path dir;  // input_data_dir / name
  InputMode mode = InputMode::kFile;
  std::string content_type;
  std::string s3_distribution_type;
  std::string record_wrapper_type;
};

// Channels sorted by name. Absent file: one channel per subdirectory of
// input_data_dir (mode File; none when that directory is absent). ConfigError
// on malformed JSON, wrong types, and an unknown TrainingInputMode (naming the channel).
std::vector<Channel> ParseInputDataConfig(const std::filesystem::path& file,
                                          const std::filesystem::path& input_data_dir);

}  // namespace mrcnn::common
