// Shape checks shared by the CPU and CUDA box kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace mrcnn::kernels {

inline void CheckBoxes(const at::Tensor& boxes, const char* op, const char* name) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op, ": ", name,
              " must be N×4 (x1,y1,x2,y2), got shape ", boxes.sizes());
}

inline void CheckWeights(at::ArrayRef<double> weights, const char* op) {
  TORCH_CHECK(weights.size() == 4, op, ": weights must be (wx, wy, ww, wh), got ", weights.size(),
              " values");
}

}  // namespace mrcnn::kernels
