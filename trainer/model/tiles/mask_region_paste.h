#pragma once
// Pasting one detection's mask into its box only, for tiled inference: the same pixels as
// kernels::PasteMasksBinary into the whole image (torchvision's paste_masks_in_image, then
// >= threshold), restricted to the rectangle the paste can touch, so no image-sized
// buffer is made per detection.
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

#include "trainer/data/mask_rle.h"

namespace mrcnn::model {

struct RegionMask {
  data::MaskRegion region;    // within the image; empty when the box lies outside it
  std::vector<uint8_t> bits;  // row-major region.height x region.width of 0/1
};

// The pixels a paste with these integer corners (x0, y0, x1, y1 inclusive, as
// kernels::PasteBoxes gives them) can touch in a height x width image: the box clamped to it,
// empty when the box lies outside it.
data::MaskRegion ClampedPasteRegion(const int64_t* corners, int64_t image_height,
                                    int64_t image_width);

// probabilities: R x R (the mask head's output for the detection, any device, floating);
// box: x1, y1, x2, y2 in image pixels. Bit-identical, inside the region, to
// PasteMasksBinary(probabilities[None, None], box[None], image_height, image_width, 1,
// threshold), which is zero outside it.
RegionMask PasteMaskRegion(const at::Tensor& probabilities, const std::array<float, 4>& box,
                           int64_t image_height, int64_t image_width, double threshold);

// The same for a Detectron2-convention model: bit-identical, inside the region, to
// PasteMasksDetectron2 (detectron2_mask_paste.h), which is zero outside it.
RegionMask PasteMaskRegionDetectron2(const at::Tensor& probabilities, const std::array<float, 4>& box,
                                     int64_t image_height, int64_t image_width, double threshold);

}  // namespace mrcnn::model
