#include "common/input_data_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

#include "common/config_error.h"
#include "common/json_file.h"

namespace mrcnn::common {
namespace {

// SageMaker's ChannelName pattern is [A-Za-z0-9\.\-_]+; "." and ".." would
// escape input/data, so they are refused too.
bool IsValidChannelName(const std::string& name) {
  if (name.empty() || name == "." || name == "..")
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
  });
}

InputMode ParseMode(const std::string& mode, const std::filesystem::path& file,
                    const std::string& field) {
  if (mode == "File")
    return InputMode::kFile;
  if (mode == "FastFile")
    return InputMode::kFastFile;
  if (mode == "Pipe")
    return InputMode::kPipe;
  throw ConfigError(file.string(), field,
                    fmt::format("must be \"File\", \"FastFile\" or \"Pipe\", got \"{}\"", mode));
}

}  // namespace

std::vector<Channel> ParseInputDataConfig(const std::filesystem::path& file,
                                          const std::filesystem::path& input_data_dir) {
  std::vector<Channel> channels;
  const auto doc = ReadJsonObjectFile(file);
  if (!doc) {
    std::error_code ec;
    if (!std::filesystem::is_directory(input_data_dir, ec))
      return channels;
    for (const auto& entry : std::filesystem::directory_iterator(input_data_dir, ec)) {
      if (!entry.is_directory(ec))
        continue;
      Channel ch;
      ch.name = entry.path().filename().string();
      ch.dir = input_data_dir / ch.name;
      channels.push_back(std::move(ch));
    }
  } else {
    for (const auto& [name, spec] : doc->items()) {
      if (!IsValidChannelName(name)) {
        throw ConfigError(file.string(), name,
                          "is not a valid channel name; use letters, digits, '.', '-' and '_'");
      }
      if (!spec.is_object()) {
        throw ConfigError(file.string(), name,
                          "must be an object of channel settings, got " + JsonTypeName(spec));
      }
      Channel ch;
      ch.name = name;
      ch.dir = input_data_dir / name;
      const std::string mode_field = name + ".TrainingInputMode";
      ch.mode =
          ParseMode(OptionalString(spec, "TrainingInputMode", file, mode_field).value_or("File"),
                    file, mode_field);
      ch.content_type =
          OptionalString(spec, "ContentType", file, name + ".ContentType").value_or("");
      ch.s3_distribution_type =
          OptionalString(spec, "S3DistributionType", file, name + ".S3DistributionType")
              .value_or("");
      ch.record_wrapper_type =
          OptionalString(spec, "RecordWrapperType", file, name + ".RecordWrapperType").value_or("");
      channels.push_back(std::move(ch));
    }
  }
  std::sort(channels.begin(), channels.end(),
            [](const Channel& a, const Channel& b) { return a.name < b.name; });
  return channels;
}

}  // namespace mrcnn::common
