#pragma once
// What the training crop (INPUT.CROP.*) asks for, as plain data: the config side
// (trainer/engine/config/input_crop.h) fills it, random_crop.h carries it out. Header only
// and dependency-free so the Torch-free config library can include it.
#include <array>

namespace mrcnn::data {

// Detectron2's crop types (detectron2/data/transforms/augmentation_impl.py, RandomCrop);
// `size` is (height, width):
//   kRelative       a fixed fraction of the image: (H * size[0], W * size[1]), rounded
//   kRelativeRange  each side's fraction drawn uniformly in [size[i], 1]
//   kAbsolute       (size[0], size[1]) pixels, each side clipped to the image
//   kAbsoluteRange  each side drawn as an integer in [size[0], size[1]], clipped to the image
enum class CropType { kRelative, kRelativeRange, kAbsolute, kAbsoluteRange };

struct CropSpec {
  bool enabled = false;
  CropType type = CropType::kRelativeRange;
  std::array<double, 2> size{0.9, 0.9};
  // An instance cut by the window is kept when at least this fraction of its area (mask
  // area, or box area without a mask) lies inside it. Our key, not Detectron2's: its
  // RandomCrop keeps every instance with a non-empty clipped box.
  double min_area_fraction = 0.3;
};

}  // namespace mrcnn::data
