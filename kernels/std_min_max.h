// std::min and std::max as host and device functions. CUDA's min/max (fminf/fmaxf)
// return the other argument when one is NaN; std::min/std::max (and so every CPU twin
// and torchvision's CPU kernels) return the first argument unless the comparison holds,
// which propagates a NaN in the first place. Kernels that must equal their CPU twin on
// non-finite input use these on both sides.
#pragma once

#include <c10/macros/Macros.h>

namespace mrcnn::kernels {

template <typename T>
C10_HOST_DEVICE inline T StdMin(T a, T b) {
  return b < a ? b : a;
}

template <typename T>
C10_HOST_DEVICE inline T StdMax(T a, T b) {
  return a < b ? b : a;
}

}  // namespace mrcnn::kernels
