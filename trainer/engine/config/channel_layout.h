#pragma once
// Where a channel's COCO annotation file and images are. Two layouts are recognised
// when DATASETS.ANNOTATION_FILE / DATASETS.IMAGE_DIR are "" (the default):
//   <channel>/annotations.json + <channel>/images/   (one dataset per channel)
//   <channel>/annotations/instances_<name>.json + <channel>/<name>/
//     (COCO's own layout and what `trainer make-shapes` writes, so train and val channels
//     may both point at one make-shapes directory)
// An explicit value is relative to the channel dir (or absolute); "{channel}" in it is
// replaced by the channel name. Torch-free.
#include <filesystem>
#include <string>

namespace mrcnn::engine {

struct ChannelLayout {
  std::filesystem::path annotation_file;
  std::filesystem::path image_dir;
};

// Throws common::ConfigError naming the channel, the key and the paths tried when the
// annotation file or image directory does not exist.
ChannelLayout ResolveChannelLayout(const std::filesystem::path& channel_dir,
                                   const std::string& channel_name,
                                   const std::string& annotation_key_value,
                                   const std::string& image_dir_key_value);

}  // namespace mrcnn::engine
