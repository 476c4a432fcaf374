// Argument checks shared by the CPU and CUDA paste_masks / paste_masks_binary kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace mrcnn::kernels {

inline void CheckPasteArgs(const char* op, const at::Tensor& masks, const at::Tensor& boxes,
                           int64_t image_height, int64_t image_width, int64_t padding) {
  TORCH_CHECK(masks.dim() == 4 && masks.size(1) == 1 && masks.size(2) == masks.size(3), op,
              ": masks must be N×1×R×R, got shape ", masks.sizes());
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && boxes.size(0) == masks.size(0), op,
              ": boxes must be N×4 with one box per mask, got shape ", boxes.sizes());
  TORCH_CHECK(image_height >= 0 && image_width >= 0 && padding >= 0, op,
              ": image size and padding must be non-negative");
  TORCH_CHECK(masks.size(2) > 0, op, ": masks must have a positive resolution");
}

}  // namespace mrcnn::kernels
