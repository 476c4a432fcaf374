// Shape checks and kernel/fallback choice shared by the CPU and CUDA box kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace mrcnn::kernels {

inline void CheckBoxes(const at::Tensor& boxes, const char* op, const char* name) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op, ": ", name,
              " must be N×4 (x1,y1,x2,y2), got shape ", boxes.sizes());
}

// box_iou takes what torchvision.ops.box_iou takes: boxes1 [..., N, 4] or one box [4],
// boxes2 [..., M, 4], any real dtype but bool.
inline void CheckIouBoxes(const at::Tensor& boxes1, const at::Tensor& boxes2, const char* op) {
  TORCH_CHECK(boxes1.dim() >= 1 && boxes1.size(-1) == 4, op,
              ": boxes1 must be [..., N, 4] (x1,y1,x2,y2) or one box [4], got shape ",
              boxes1.sizes());
  TORCH_CHECK(boxes2.dim() >= 2 && boxes2.size(-1) == 4, op,
              ": boxes2 must be [..., M, 4] (x1,y1,x2,y2), got shape ", boxes2.sizes());
  for (const at::Tensor* b : {&boxes1, &boxes2}) {
    TORCH_CHECK(b->scalar_type() != at::kBool && !b->is_complex(), op,
                ": boxes must be real numbers, got ", b->scalar_type());
  }
}

// The box kernels take 2-D float32/float64 tensors of one dtype; everything else
// torchvision accepts goes through box_ops_torchvision.h.
inline bool KernelDtype(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
}

inline bool KernelBoxes(const at::Tensor& a, const at::Tensor& b) {
  return a.dim() == 2 && b.dim() == 2 && KernelDtype(a) && a.scalar_type() == b.scalar_type();
}

inline void CheckWeights(at::ArrayRef<double> weights, const char* op) {
  TORCH_CHECK(weights.size() == 4, op, ": weights must be (wx, wy, ww, wh), got ", weights.size(),
              " values");
}

// encode_boxes' arguments: two N×4 box tensors and four weights.
inline void CheckEncodeArgs(const at::Tensor& reference, const at::Tensor& proposals,
                            at::ArrayRef<double> weights, const char* op) {
  CheckBoxes(reference, op, "reference_boxes");
  CheckBoxes(proposals, op, "proposals");
  CheckWeights(weights, op);
  TORCH_CHECK(reference.size(0) == proposals.size(0), op,
              ": reference_boxes and proposals must have the same number of rows");
}

// decode_boxes' arguments: N×4k codes for N boxes, four weights.
inline void CheckDecodeArgs(const at::Tensor& codes, const at::Tensor& boxes,
                            at::ArrayRef<double> weights, const char* op) {
  CheckBoxes(boxes, op, "boxes");
  CheckWeights(weights, op);
  TORCH_CHECK(codes.dim() == 2 && codes.size(0) == boxes.size(0) && codes.size(1) % 4 == 0, op,
              ": rel_codes must be N×4k with N = boxes rows (", boxes.size(0), "), got shape ",
              codes.sizes());
}

}  // namespace mrcnn::kernels
