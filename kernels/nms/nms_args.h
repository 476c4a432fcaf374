// Argument checks and the torchvision batched-NMS conventions shared by the CPU and
// CUDA NMS kernels (ATen ops only, so they run on either device).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "kernels/ops.h"

namespace mrcnn::kernels {

inline void CheckNmsInputs(const at::Tensor& boxes, const at::Tensor& scores, const char* op) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op,
              ": boxes must be N×4 (x1,y1,x2,y2), got shape ", boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), op,
              ": scores must be 1-D with one entry per box (", boxes.size(0), "), got shape ",
              scores.sizes());
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type(), op,
              ": boxes and scores must share a dtype, got ", boxes.scalar_type(), " and ",
              scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(), op, ": boxes are on ", boxes.device(),
              " but scores are on ", scores.device());
}

inline void CheckIdxs(const at::Tensor& idxs, const at::Tensor& boxes, const char* op) {
  TORCH_CHECK(idxs.dim() == 1 && idxs.size(0) == boxes.size(0), op,
              ": idxs must be 1-D with one class/level id per box (", boxes.size(0),
              "), got shape ", idxs.sizes());
  TORCH_CHECK(idxs.device() == boxes.device(), op, ": boxes are on ", boxes.device(),
              " but idxs are on ", idxs.device());
  TORCH_CHECK(!idxs.is_complex(), op, ": idxs must be real, got ", idxs.scalar_type());
}

// nms_keep_mask_grouped: boxes B×N×4, scores and usable B×N, groups that tile the N columns.
inline void CheckGroupedNmsInputs(const at::Tensor& boxes, const at::Tensor& scores,
                                  const at::Tensor& usable, c10::IntArrayRef group_sizes,
                                  const char* op) {
  TORCH_CHECK(boxes.dim() == 3 && boxes.size(2) == 4, op,
              ": boxes must be B×N×4 (x1,y1,x2,y2 per image), got shape ", boxes.sizes());
  TORCH_CHECK(
      scores.dim() == 2 && scores.size(0) == boxes.size(0) && scores.size(1) == boxes.size(1), op,
      ": scores must be B×N (", boxes.size(0), "×", boxes.size(1), "), got shape ", scores.sizes());
  TORCH_CHECK(usable.sizes() == scores.sizes() && usable.scalar_type() == at::kBool, op,
              ": usable must be a B×N bool tensor, got ", usable.scalar_type(), " of shape ",
              usable.sizes());
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type(), op,
              ": boxes and scores must share a dtype, got ", boxes.scalar_type(), " and ",
              scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device() && usable.device() == boxes.device(), op,
              ": boxes, scores and usable must be on one device, got ", boxes.device(), ", ",
              scores.device(), " and ", usable.device());
  int64_t total = 0;
  for (const int64_t size : group_sizes) {
    TORCH_CHECK(size >= 0, op, ": group sizes must be >= 0, got ", group_sizes);
    total += size;
  }
  TORCH_CHECK(total == boxes.size(1), op, ": group sizes ", group_sizes, " add up to ", total,
              ", not to the ", boxes.size(1), " boxes of each image");
}

// kBatchedNmsPerClassAbove: kernels/ops.h.

// The boxes torchvision's coordinate trick runs NMS on, computed with the same
// operations in the box dtype (so IoUs and suppressions round exactly as there).
inline at::Tensor CoordinateTrickBoxes(const at::Tensor& boxes, const at::Tensor& idxs) {
  const at::Tensor max_coordinate = boxes.max();
  const at::Tensor offsets =
      idxs.to(boxes.options()) * (max_coordinate + at::scalar_tensor(1, boxes.options()));
  return boxes + offsets.unsqueeze(1);
}

// int64 keys that are equal exactly when the idxs values are (as torch.unique and ==
// in torchvision's per-class algorithm): integers as they are, floating values by the
// bits of their double (after + 0.0, so -0.0 and 0.0 share a key). NaN values, which
// equal nothing, get keys of their own; callers drop or isolate them.
inline at::Tensor ClassKeys(const at::Tensor& idxs) {
  if (!at::isFloatingType(idxs.scalar_type())) {
    return idxs.to(at::kLong);
  }
  return (idxs.to(at::kDouble) + 0.0).view(at::kLong);
}

}  // namespace mrcnn::kernels
