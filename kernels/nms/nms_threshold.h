// The IoU threshold as a value of the box dtype such that `iou > result` (in T)
// equals torchvision's CPU test `iou > threshold` (iou promoted to double).
#pragma once

#include <cmath>
#include <limits>

namespace mrcnn::kernels {

template <typename T>
inline T StrictThreshold(double threshold) {
  T t = static_cast<T>(threshold);
  // The largest T not above the threshold: for T values, x > threshold <=> x > t.
  if (static_cast<double>(t) > threshold) {
    t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  }
  return t;
}

}  // namespace mrcnn::kernels
