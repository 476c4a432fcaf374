#include "trainer/engine/config/channel_layout.h"

#include <cctype>
#include <system_error>
#include <vector>

#include "common/config_error.h"

namespace mrcnn::engine {
namespace fs = std::filesystem;
namespace {

std::string SubstituteChannel(std::string text, const std::string& name) {
  const std::string token = "{channel}";
  for (size_t at = text.find(token); at != std::string::npos;
       at = text.find(token, at + name.size())) {
    text.replace(at, token.size(), name);
  }
  return text;
}

fs::path UnderChannel(const fs::path& channel_dir, const std::string& value) {
  const fs::path p(value);
  return p.is_absolute() ? p : channel_dir / p;
}

// Images without their COCO file is what a host gets from a channel sharded over several
// hosts: the file went to one host only. The walk runs only once the file is missing.
std::string ShardingHint(const fs::path& channel_dir, const std::string& channel_name) {
  const std::string hint =
      "; the channel holds images but no annotation file: if it is ShardedByS3Key on several "
      "hosts, the annotation file went to one host only, so set its S3DistributionType in "
      "inputdataconfig.json to FullyReplicated";
  std::error_code ec;
  if (fs::is_directory(channel_dir / "images", ec) ||
      fs::is_directory(channel_dir / channel_name, ec)) {
    return hint;
  }
  for (fs::directory_iterator it(channel_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string ext = it->path().extension().string();
    for (char& c : ext)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png")
      return hint;
  }
  return "";
}

}  // namespace

ChannelLayout ResolveChannelLayout(const fs::path& channel_dir, const std::string& channel_name,
                                   const std::string& annotation_key_value,
                                   const std::string& image_dir_key_value) {
  std::error_code ec;
  const std::string where = channel_dir.string() + " (channel \"" + channel_name + "\")";
  ChannelLayout layout;
  if (!annotation_key_value.empty()) {
    layout.annotation_file =
        UnderChannel(channel_dir, SubstituteChannel(annotation_key_value, channel_name));
    if (!fs::is_regular_file(layout.annotation_file, ec)) {
      throw common::ConfigError(
          where, "DATASETS.ANNOTATION_FILE",
          "names " + layout.annotation_file.string() +
              ", which does not exist: fix the key or the channel's contents" +
              ShardingHint(channel_dir, channel_name));
    }
  } else {
    const std::vector<fs::path> tried = {
        channel_dir / "annotations.json",
        channel_dir / "annotations" / ("instances_" + channel_name + ".json")};
    for (const auto& candidate : tried) {
      if (fs::is_regular_file(candidate, ec)) {
        layout.annotation_file = candidate;
        break;
      }
    }
    if (layout.annotation_file.empty()) {
      throw common::ConfigError(where, "DATASETS.ANNOTATION_FILE",
                                "is empty (find by layout) and neither " + tried[0].string() +
                                    " nor " + tried[1].string() +
                                    " exists: set the key to the COCO file's path in the channel" +
                                    ShardingHint(channel_dir, channel_name));
    }
  }
  if (!image_dir_key_value.empty()) {
    layout.image_dir =
        UnderChannel(channel_dir, SubstituteChannel(image_dir_key_value, channel_name));
    if (!fs::is_directory(layout.image_dir, ec)) {
      throw common::ConfigError(
          where, "DATASETS.IMAGE_DIR",
          "names " + layout.image_dir.string() + ", which is not a directory");
    }
  } else {
    // The directory beside the layout the annotation file was found in; COCO file_names
    // are relative to it.
    const bool flat = layout.annotation_file.parent_path() == channel_dir;
    const std::vector<fs::path> tried =
        flat ? std::vector<fs::path>{channel_dir / "images", channel_dir}
             : std::vector<fs::path>{channel_dir / channel_name, channel_dir / "images"};
    for (const auto& candidate : tried) {
      if (fs::is_directory(candidate, ec)) {
        layout.image_dir = candidate;
        break;
      }
    }
    if (layout.image_dir.empty()) {
      throw common::ConfigError(
          where, "DATASETS.IMAGE_DIR",
          "is empty (find by layout) and " + tried[0].string() +
              " does not exist: set the key to the image directory in the channel");
    }
  }
  return layout;
}

}  // namespace mrcnn::engine
