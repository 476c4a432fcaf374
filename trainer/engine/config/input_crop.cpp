#include "trainer/engine/config/input_crop.h"

#include <cmath>
#include <string>

#include "common/config_error.h"

namespace mrcnn::engine {

namespace {

using common::ConfigError;
using data::CropType;

CropType CropTypeOf(const std::string& name) {
  if (name == "relative")
    return CropType::kRelative;
  if (name == "relative_range")
    return CropType::kRelativeRange;
  if (name == "absolute")
    return CropType::kAbsolute;
  if (name == "absolute_range")
    return CropType::kAbsoluteRange;
  throw ConfigError("config", "INPUT.CROP.TYPE",
                    "must be relative, relative_range, absolute or absolute_range (Detectron2's "
                    "crop types), got \"" +
                        name + "\"");
}

std::string SizeText(const FloatList& size) {
  std::string text = "[";
  for (size_t i = 0; i < size.size(); ++i)
    text += (i ? ", " : "") + ToYamlText(size[i]);
  return text + "]";
}

// SIZE as (height, width) for `type`, or a ConfigError saying what it must be.
std::array<double, 2> CropSizeOf(const FloatList& size, CropType type, const std::string& name) {
  const std::string key = "INPUT.CROP.SIZE";
  const std::string got = ", got " + SizeText(size);
  if (size.size() != 2 || !(size[0] > 0) || !(size[1] > 0) || !std::isfinite(size[0]) ||
      !std::isfinite(size[1])) {
    throw ConfigError("config", key, "must be two positive numbers (height, width)" + got);
  }
  const bool relative = type == CropType::kRelative || type == CropType::kRelativeRange;
  if (relative && (size[0] > 1 || size[1] > 1)) {
    throw ConfigError("config", key,
                      "must be fractions in (0, 1] of the image's height and width with TYPE " +
                          name + got + " (pixels need TYPE absolute)");
  }
  if (!relative && (size[0] != std::floor(size[0]) || size[1] != std::floor(size[1]))) {
    throw ConfigError("config", key,
                      "must be whole pixels with TYPE " + name + got +
                          " (fractions of the image need TYPE relative)");
  }
  if (type == CropType::kAbsoluteRange && size[0] > size[1]) {
    throw ConfigError("config", key,
                      "must be [min, max] with min <= max with TYPE absolute_range" + got);
  }
  return {size[0], size[1]};
}

}  // namespace

data::CropSpec InputCropOf(const TrainConfig& config) {
  data::CropSpec spec;
  spec.enabled = config.GetBool("INPUT.CROP.ENABLED");
  const std::string& name = config.GetString("INPUT.CROP.TYPE");
  spec.type = CropTypeOf(name);
  spec.size = CropSizeOf(config.GetFloatList("INPUT.CROP.SIZE"), spec.type, name);
  spec.min_area_fraction = config.GetFloat("INPUT.CROP.MIN_AREA_FRACTION");
  if (!(spec.min_area_fraction >= 0 && spec.min_area_fraction <= 1)) {
    throw ConfigError("config", "INPUT.CROP.MIN_AREA_FRACTION",
                      "must be a fraction in [0, 1] of an instance's area, got " +
                          ToYamlText(spec.min_area_fraction));
  }
  return spec;
}

}  // namespace mrcnn::engine
