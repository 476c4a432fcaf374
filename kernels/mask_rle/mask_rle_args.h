// Argument checks and the pixel order shared by the CPU and CUDA mask_rle_changes kernels.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>

namespace mrcnn::kernels {

// masks N×1×H×W or N×H×W, uint8 (nonzero = foreground) or bool -> N×(W·H) uint8 in COCO's
// column-major order (x outer, y inner), contiguous, on the masks' device: both kernels then
// read each mask front to back (coalesced on a GPU).
inline at::Tensor ColumnMajorMasks(const char* op, const at::Tensor& masks) {
  TORCH_CHECK(masks.dim() == 3 || (masks.dim() == 4 && masks.size(1) == 1), op,
              ": masks must be N×1×H×W or N×H×W, got shape ", masks.sizes());
  TORCH_CHECK(masks.scalar_type() == at::kByte || masks.scalar_type() == at::kBool, op,
              ": masks must be uint8 or bool, got ", masks.scalar_type());
  const int64_t n = masks.size(0), h = masks.size(-2), w = masks.size(-1);
  TORCH_CHECK(h * w <= std::numeric_limits<int32_t>::max(), op, ": a ", h, "x", w,
              " mask has more pixels than int32 positions can name");
  at::Tensor m = masks.reshape({n, h, w});
  if (m.scalar_type() == at::kBool) {
    m = m.view(at::kByte);  // one byte each, 0 or 1
  }
  return m.transpose(1, 2).contiguous().view({n, h * w});
}

}  // namespace mrcnn::kernels
