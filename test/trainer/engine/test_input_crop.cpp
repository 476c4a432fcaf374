// INPUT.CROP.* read into a CropSpec, and the errors for bad values, which stop a job when
// it is resolved.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "common/config_error.h"
#include "trainer/engine/config/input_crop.h"
#include "trainer/engine/config/job_config.h"

using mrcnn::common::ConfigError;
using mrcnn::data::CropType;
using namespace mrcnn::engine;
namespace fs = std::filesystem;

namespace {

std::string CropErrorOf(const std::vector<std::string>& opts) {
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts(opts);
  try {
    InputCropOf(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("INPUT.CROP: Detectron2's defaults, off; each type read", "[config][crop]") {
  const auto defaults = InputCropOf(TrainConfig::Defaults());
  CHECK_FALSE(defaults.enabled);
  CHECK(defaults.type == CropType::kRelativeRange);
  CHECK(defaults.size == std::array<double, 2>{0.9, 0.9});
  CHECK(defaults.min_area_fraction == 0.3);

  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"INPUT.CROP.ENABLED", "True", "INPUT.CROP.TYPE", "absolute", "INPUT.CROP.SIZE",
               "[512, 768]", "INPUT.CROP.MIN_AREA_FRACTION", "0.5"});
  auto spec = InputCropOf(c);
  CHECK(spec.enabled);
  CHECK(spec.type == CropType::kAbsolute);
  CHECK(spec.size == std::array<double, 2>{512, 768});
  CHECK(spec.min_area_fraction == 0.5);
  c.MergeOpts({"INPUT.CROP.TYPE", "absolute_range", "INPUT.CROP.SIZE", "[384, 600]"});
  CHECK(InputCropOf(c).type == CropType::kAbsoluteRange);
  c.MergeOpts({"INPUT.CROP.TYPE", "relative", "INPUT.CROP.SIZE", "[0.5, 1]"});
  CHECK(InputCropOf(c).type == CropType::kRelative);
  CHECK(InputCropOf(c).size == std::array<double, 2>{0.5, 1.0});

  const auto drone = [] {
    TrainConfig d = TrainConfig::Defaults();
    d.MergeFile(fs::path(MRCNN_SOURCE_DIR) / "configs" / "mask_rcnn_R_50_FPN_drone_finetune.yaml");
    return InputCropOf(d);
  }();
  CHECK(drone.enabled);
  CHECK(drone.type == CropType::kAbsolute);
  CHECK(drone.size == std::array<double, 2>{800, 800});
}

TEST_CASE("INPUT.CROP: bad values name the key and the fix", "[config][crop]") {
  struct Case {
    std::vector<std::string> opts;
    std::string key, says;
  };
  for (const Case& k : {
           Case{{"INPUT.CROP.TYPE", "absolut"},
                "INPUT.CROP.TYPE",
                "relative, relative_range, absolute or"},
           Case{{"INPUT.CROP.SIZE", "[0.5]"}, "INPUT.CROP.SIZE", "two positive numbers"},
           Case{{"INPUT.CROP.SIZE", "[0.5, 0.5, 0.5]"}, "INPUT.CROP.SIZE", "two positive numbers"},
           Case{{"INPUT.CROP.SIZE", "[0.5, 0]"}, "INPUT.CROP.SIZE", "two positive numbers"},
           Case{{"INPUT.CROP.SIZE", "[-1, 0.5]"}, "INPUT.CROP.SIZE", "two positive numbers"},
           Case{{"INPUT.CROP.SIZE", "[1024, 1024]"}, "INPUT.CROP.SIZE", "need TYPE absolute"},
           Case{{"INPUT.CROP.TYPE", "relative", "INPUT.CROP.SIZE", "[0.5, 1.5]"},
                "INPUT.CROP.SIZE",
                "fractions in (0, 1]"},
           Case{{"INPUT.CROP.TYPE", "absolute", "INPUT.CROP.SIZE", "[0.5, 0.5]"},
                "INPUT.CROP.SIZE",
                "need TYPE relative"},
           Case{{"INPUT.CROP.TYPE", "absolute", "INPUT.CROP.SIZE", "[512.5, 512]"},
                "INPUT.CROP.SIZE",
                "whole pixels"},
           Case{{"INPUT.CROP.TYPE", "absolute_range", "INPUT.CROP.SIZE", "[800, 400]"},
                "INPUT.CROP.SIZE",
                "min <= max"},
           Case{{"INPUT.CROP.MIN_AREA_FRACTION", "1.5"}, "INPUT.CROP.MIN_AREA_FRACTION", "[0, 1]"},
           Case{{"INPUT.CROP.MIN_AREA_FRACTION", "-0.1"}, "INPUT.CROP.MIN_AREA_FRACTION", "[0, 1]"},
       }) {
    const std::string err = CropErrorOf(k.opts);
    INFO(k.opts[k.opts.size() - 1] << " -> " << err);
    CHECK_THAT(err, Catch::StartsWith("config: \"" + k.key + "\""));
    CHECK_THAT(err, Catch::Contains(k.says));
  }
  // Checked even while the crop is off: a config that turns it on later must be sound.
  CHECK_THAT(CropErrorOf({"INPUT.CROP.ENABLED", "False", "INPUT.CROP.TYPE", "square"}),
             Catch::Contains("INPUT.CROP.TYPE"));
}

TEST_CASE("a bad INPUT.CROP stops the job when it is resolved", "[job][crop]") {
  const fs::path root =
      fs::temp_directory_path() / ("engine_crop_" + std::to_string(std::random_device{}()));
  fs::create_directories(root / "input/data/train");
  const mrcnn::common::EnvMap env{{"SAGEMAKER_BASE_DIR", root.string()}};
  TrainJobArgs args;
  args.opts = "INPUT.CROP.ENABLED True INPUT.CROP.TYPE absolute INPUT.CROP.SIZE [1024, 1024]";
  CHECK_NOTHROW(ResolveTrainJob(args, env, ""));
  args.opts = "INPUT.CROP.ENABLED True INPUT.CROP.TYPE tiles";
  CHECK_THROWS_WITH(ResolveTrainJob(args, env, ""), Catch::Contains("INPUT.CROP.TYPE"));
  fs::remove_all(root);
}
