// The two registered mask-paste ops as adapters over one device's Paste (probabilities or a
// binary mask), so the CPU and CUDA files register them the same way:
// MaskPasteOps<&Paste>::Probabilities and ::Binary.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::kernels {

using MaskPasteImpl = at::Tensor (*)(const char* op, const at::Tensor& masks,
                                     const at::Tensor& boxes, int64_t image_height,
                                     int64_t image_width, int64_t padding, bool binary,
                                     double threshold);

template <MaskPasteImpl Paste>
struct MaskPasteOps {
  // mrcnn::paste_masks: the probabilities, in the masks' dtype.
  static at::Tensor Probabilities(const at::Tensor& masks, const at::Tensor& boxes,
                                  int64_t image_height, int64_t image_width, int64_t padding) {
    return Paste("mrcnn::paste_masks", masks, boxes, image_height, image_width, padding, false,
                 0.0);
  }
  // mrcnn::paste_masks_binary: uint8, value >= threshold.
  static at::Tensor Binary(const at::Tensor& masks, const at::Tensor& boxes, int64_t image_height,
                           int64_t image_width, int64_t padding, double threshold) {
    return Paste("mrcnn::paste_masks_binary", masks, boxes, image_height, image_width, padding,
                 true, threshold);
  }
};

}  // namespace mrcnn::kernels
