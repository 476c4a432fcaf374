#pragma once
// Detectron2's mask paste (detectron2/layers/mask_ops.py paste_masks_in_image, as it runs
// on a CPU): each mask is sampled bilinearly (grid_sample, align_corners=false, zeros
// outside) at the centres of the image pixels in its box's region, the box widened by one
// pixel each side and clipped to the image. torchvision pastes differently (the mask padded
// by one cell and resized onto the integer box), so a Detectron2 model's masks are pasted
// this way to equal Detectron2's.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::model {

// masks: N x 1 x M x M probabilities; boxes: N x 4 (x1, y1, x2, y2) in the image's pixels.
// threshold >= 0: N x 1 x H x W uint8, 1 where the sampled value >= threshold (Detectron2's
// binarisation); threshold < 0: the sampled probabilities (float), 0 outside each region.
at::Tensor PasteMasksDetectron2(const at::Tensor& masks, const at::Tensor& boxes,
                                int64_t image_height, int64_t image_width, double threshold);

// Each box's sampling region as inclusive integer corners (N x 4 int64, on the boxes'
// device; not yet clamped to the image): floor(x1) - 1, floor(y1) - 1, ceil(x2), ceil(y2).
// Outside it a pasted mask is 0.
at::Tensor Detectron2PasteCorners(const at::Tensor& boxes);

// The region a mask of `box` is sampled on: [x0, x1) x [y0, y1) in whole pixels.
struct PasteRegion {
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
PasteRegion Detectron2PasteRegion(const float box[4], int64_t image_height, int64_t image_width);

// One mask (M x M) sampled on `region` (h x w float), Detectron2's grid.
at::Tensor SampleMaskOnRegion(const at::Tensor& mask, const at::Tensor& box,
                              const PasteRegion& region);

}  // namespace mrcnn::model
