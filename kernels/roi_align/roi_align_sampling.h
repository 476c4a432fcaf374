// Where ROIAlign samples and with what weights, one copy for the CPU and CUDA kernels
// (torchvision's roi_align_common arithmetic): the coordinate of each sampling point and
// its four bilinear taps.
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>

#include "kernels/host_device_math.h"

namespace mrcnn::kernels {

// Coordinate of sampling point i of bin p along one axis (grid points per bin), in the
// feature map's pixels. Plain operators: each twin keeps its compiler's rounding (the CUDA
// kernel fuses the multiply-add here, within the kernel tests' tolerance).
template <typename acc_t, typename index_t>
C10_HOST_DEVICE inline acc_t SamplePosition(acc_t start, acc_t bin, index_t p, index_t i,
                                            index_t grid) {
  return start + static_cast<acc_t>(p) * bin +
         static_cast<acc_t>(i + .5f) * bin / static_cast<acc_t>(grid);
}

// The four taps (flat offsets into one H×W plane) and weights of one sampling point.
template <typename acc_t>
struct BilinearTaps {
  int64_t p1, p2, p3, p4;
  acc_t w1, w2, w3, w4;
  bool valid;  // false: no taps; the backward pass skips the point
};

// Points outside the map (or an empty map) get zero weights at offset 0, as torchvision's
// CPU forward (it adds 0 * in[0]); a NaN coordinate (the other one inside the map) gets NaN
// weights at offset 0, so the bin pools NaN as in torchvision (which reads out of bounds
// there). Neither is `valid`.
template <typename acc_t>
C10_HOST_DEVICE inline BilinearTaps<acc_t> ComputeBilinearTaps(acc_t y, acc_t x, int64_t height,
                                                               int64_t width) {
  BilinearTaps<acc_t> t{0, 0, 0, 0, 0, 0, 0, 0, false};
  if (height <= 0 || width <= 0 || y < -1.0 || y > height || x < -1.0 || x > width) {
    return t;
  }
  if (HdIsNan(y) || HdIsNan(x)) {
    t.w1 = t.w2 = t.w3 = t.w4 = y + x;  // NaN
    return t;
  }
  if (y <= 0)
    y = 0;
  if (x <= 0)
    x = 0;
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<acc_t>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<acc_t>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const acc_t ly = y - y_low, lx = x - x_low, hy = acc_t(1) - ly, hx = acc_t(1) - lx;
  t.p1 = y_low * width + x_low;
  t.p2 = y_low * width + x_high;
  t.p3 = y_high * width + x_low;
  t.p4 = y_high * width + x_high;
  t.w1 = hy * hx;
  t.w2 = hy * lx;
  t.w3 = ly * hx;
  t.w4 = ly * lx;
  t.valid = true;
  return t;
}

}  // namespace mrcnn::kernels
