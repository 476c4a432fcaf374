// Argument checks and box expansion shared by the CPU and CUDA paste_masks /
// paste_masks_binary kernels.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>

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

// torchvision's expand_boxes(boxes, (R + 2·padding) / R).to(int64), with the same
// operations in the boxes' own dtype (float16/bfloat16 boxes round there, as in
// torchvision): N×4 int64 (x0, y0, x1, y1) on the boxes' device. Values an int64 cannot
// hold (NaN, infinities) become INT64_MIN, what the conversion gives on x86 CPUs, on
// every device.
inline at::Tensor PasteBoxes(const at::Tensor& boxes, int64_t r, int64_t padding) {
  const double scale = static_cast<double>(r + 2 * padding) / static_cast<double>(r);
  const at::Tensor x1 = boxes.select(1, 0), y1 = boxes.select(1, 1);
  const at::Tensor x2 = boxes.select(1, 2), y2 = boxes.select(1, 3);
  const at::Tensor w_half = (x2 - x1) * 0.5 * scale;
  const at::Tensor h_half = (y2 - y1) * 0.5 * scale;
  const at::Tensor x_c = (x2 + x1) * 0.5;
  const at::Tensor y_c = (y2 + y1) * 0.5;
  at::Tensor expanded = at::zeros_like(boxes, at::MemoryFormat::Contiguous);
  expanded.select(1, 0).copy_(x_c - w_half);
  expanded.select(1, 1).copy_(y_c - h_half);
  expanded.select(1, 2).copy_(x_c + w_half);
  expanded.select(1, 3).copy_(y_c + h_half);
  if (!expanded.is_floating_point()) {
    return expanded.to(at::kLong);
  }
  const at::Tensor representable = expanded.abs() < 9.2e18;
  return at::where(representable, expanded.to(at::kLong),
                   at::full_like(expanded, std::numeric_limits<int64_t>::min(),
                                 expanded.options().dtype(at::kLong)));
}

}  // namespace mrcnn::kernels
