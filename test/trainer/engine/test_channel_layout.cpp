// Where a channel's COCO file and images are found (trainer/engine/config/channel_layout.h).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "common/config_error.h"
#include "trainer/engine/config/channel_layout.h"

namespace fs = std::filesystem;
using mrcnn::engine::ResolveChannelLayout;

namespace {

fs::path FreshDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mrcnn_channel_layout_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "{}";
}

}  // namespace

TEST_CASE("flat layout: annotations.json + images/") {
  const fs::path ch = FreshDir("flat");
  Touch(ch / "annotations.json");
  fs::create_directories(ch / "images");
  const auto layout = ResolveChannelLayout(ch, "train", "", "");
  CHECK(layout.annotation_file == ch / "annotations.json");
  CHECK(layout.image_dir == ch / "images");
  fs::remove_all(ch);
}

TEST_CASE("make-shapes / COCO layout: both channels may point at one directory") {
  const fs::path ch = FreshDir("coco");
  Touch(ch / "annotations" / "instances_train.json");
  Touch(ch / "annotations" / "instances_val.json");
  fs::create_directories(ch / "train");
  fs::create_directories(ch / "val");
  const auto train = ResolveChannelLayout(ch, "train", "", "");
  CHECK(train.annotation_file == ch / "annotations" / "instances_train.json");
  CHECK(train.image_dir == ch / "train");
  const auto val = ResolveChannelLayout(ch, "val", "", "");
  CHECK(val.annotation_file == ch / "annotations" / "instances_val.json");
  CHECK(val.image_dir == ch / "val");
  fs::remove_all(ch);
}

TEST_CASE("explicit keys with {channel}, and errors naming the key") {
  const fs::path ch = FreshDir("explicit");
  Touch(ch / "ann" / "val2017.json");
  fs::create_directories(ch / "pics_val");
  const auto layout = ResolveChannelLayout(ch, "val", "ann/{channel}2017.json", "pics_{channel}");
  CHECK(layout.annotation_file == ch / "ann" / "val2017.json");
  CHECK(layout.image_dir == ch / "pics_val");
  CHECK_THROWS_WITH(ResolveChannelLayout(ch, "val", "missing.json", ""),
                    Catch::Contains("DATASETS.ANNOTATION_FILE") && Catch::Contains("missing.json"));
  CHECK_THROWS_WITH(ResolveChannelLayout(ch, "val", "ann/val2017.json", "nope"),
                    Catch::Contains("DATASETS.IMAGE_DIR"));
  CHECK_THROWS_WITH(ResolveChannelLayout(ch, "test", "", ""),
                    Catch::Contains("DATASETS.ANNOTATION_FILE") && Catch::Contains("instances_test.json"));
  fs::remove_all(ch);
}

TEST_CASE("images without their annotation file point at ShardedByS3Key") {
  const fs::path ch = FreshDir("sharded");
  const auto error_of = [&] {
    try {
      ResolveChannelLayout(ch, "train", "", "");
    } catch (const mrcnn::common::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  // Nothing there: the plain message, no guess about sharding.
  CHECK_THAT(error_of(), Catch::Contains("annotations.json") && !Catch::Contains("ShardedByS3Key"));
  // The part of a sharded channel a host without the COCO file gets: images only.
  Touch(ch / "images" / "000007.jpg");
  CHECK_THAT(error_of(), Catch::Contains("DATASETS.ANNOTATION_FILE") &&
                             Catch::Contains("holds images but no annotation file") &&
                             Catch::Contains("ShardedByS3Key") &&
                             Catch::Contains("FullyReplicated"));
  fs::remove_all(ch / "images");
  Touch(ch / "000008.PNG");
  CHECK_THAT(error_of(), Catch::Contains("ShardedByS3Key"));
  CHECK_THROWS_WITH(ResolveChannelLayout(ch, "train", "coco.json", ""),
                    Catch::Contains("coco.json") && Catch::Contains("FullyReplicated"));
  fs::remove_all(ch);
}
