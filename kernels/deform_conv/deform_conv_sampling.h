// Where a deformable convolution samples its input and with what weights, one copy for the
// CPU and CUDA kernels: the offset and mask channel of a (deformable group, kernel tap), the
// sampling point of a tap at an output pixel, zero-padded bilinear interpolation with the
// border rule of torchvision.ops.deform_conv2d, and the interpolant's slopes for the offset
// gradient.
//
// Border rule (forward): a point in the open box (-1, H) × (-1, W) is interpolated from its
// four integer corners, a corner outside the map counting as 0; any other point (and a NaN
// one) samples 0. torchvision's CPU/CUDA kernels and Detectron2's deform_conv_cuda_kernel.cu
// agree on this. The input gradient is the exact transpose of that rule (both agree again).
// They differ on a measure-zero set in the offset gradient: at a coordinate of exactly -1
// Detectron2's get_coordinate_weight returns 0 while torchvision differentiates the
// zero-padded interpolant from its corners (nonzero: the slope towards row/column 0). We
// follow torchvision, the oracle: SampleSlopes tests corners only, on [-1, H) × [-1, W).
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>

#include "kernels/host_device_math.h"

namespace mrcnn::kernels {

// One deformable convolution's geometry, passed by value to the kernels. Every size is
// positive once CheckDeformConvArgs has accepted the arguments, and channels is a multiple
// of offset_groups.
struct DeformConvShape {
  int64_t channels, height, width;  // input C_in × H × W (per image)
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t out_h, out_w;
  int64_t offset_groups;  // deformable groups: input channel c uses group c / (C_in / groups)

  C10_HOST_DEVICE int64_t taps() const { return kernel_h * kernel_w; }
  C10_HOST_DEVICE int64_t out_pixels() const { return out_h * out_w; }
  C10_HOST_DEVICE int64_t channels_per_offset_group() const { return channels / offset_groups; }
  C10_HOST_DEVICE int64_t offset_channels() const { return 2 * offset_groups * taps(); }
  C10_HOST_DEVICE int64_t mask_channels() const { return offset_groups * taps(); }
};

// Offset channel of the row (y) displacement of kernel tap `tap` (= i * kernel_w + j, row i,
// column j) in deformable group g; the column (x) displacement is the next channel. That is
// the interleaved layout of torchvision and Detectron2 (y first, per tap).
C10_HOST_DEVICE inline int64_t OffsetChannelY(int64_t g, int64_t tap, int64_t taps) {
  return 2 * (g * taps + tap);
}

// Mask (modulation) channel of kernel tap `tap` in deformable group g.
C10_HOST_DEVICE inline int64_t MaskChannel(int64_t g, int64_t tap, int64_t taps) {
  return g * taps + tap;
}

// One tap's sampling point at one output pixel and the factor its sample is scaled by
// (the mask value, 1 for DCN v1).
template <typename acc_t>
struct DeformSample {
  acc_t y, x, mask;
};

// The sampling point of tap `tap` at output pixel (oh, ow) of one image: the plain
// convolution's grid point plus the learned displacement. offset: that image's
// offset_channels() × out_h × out_w values; mask: its mask_channels() × out_h × out_w values,
// or nullptr (v1). The grid point is converted to acc_t before the displacement is added, as
// torchvision does.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline DeformSample<acc_t> TapSample(const DeformConvShape& s,
                                                     const scalar_t* offset, const scalar_t* mask,
                                                     int64_t g, int64_t tap, int64_t oh,
                                                     int64_t ow) {
  const int64_t pixels = s.out_pixels(), p = oh * s.out_w + ow, taps = s.taps();
  const int64_t i = tap / s.kernel_w, j = tap % s.kernel_w;
  const int64_t cy = OffsetChannelY(g, tap, taps);
  DeformSample<acc_t> r;
  r.y = static_cast<acc_t>(oh * s.stride_h - s.pad_h + i * s.dilation_h) +
        static_cast<acc_t>(offset[cy * pixels + p]);
  r.x = static_cast<acc_t>(ow * s.stride_w - s.pad_w + j * s.dilation_w) +
        static_cast<acc_t>(offset[(cy + 1) * pixels + p]);
  r.mask =
      mask != nullptr ? static_cast<acc_t>(mask[MaskChannel(g, tap, taps) * pixels + p]) : acc_t(1);
  return r;
}

// The forward rule's domain: the open box (-1, H) × (-1, W); false for NaN.
template <typename acc_t>
C10_HOST_DEVICE inline bool InSamplingBox(acc_t y, acc_t x, int64_t height, int64_t width) {
  return y > acc_t(-1) && y < static_cast<acc_t>(height) && x > acc_t(-1) &&
         x < static_cast<acc_t>(width);
}

// The integer cell holding a point: its top-left corner (y0, x0) (the other corners are
// y0 + 1, x0 + 1) and the point's fractional position in it. Only for points within one
// pixel of the map (the callers' domains), so the corner fits any index type.
template <typename acc_t>
struct BilinearCell {
  int64_t y0, x0;
  acc_t ly, lx;  // y - y0 and x - x0, in [0, 1)
};

template <typename acc_t>
C10_HOST_DEVICE inline BilinearCell<acc_t> CellOf(acc_t y, acc_t x) {
  const acc_t fy = HdFloor(y), fx = HdFloor(x);
  return {static_cast<int64_t>(fy), static_cast<int64_t>(fx), y - fy, x - fx};
}

// The four corners' bilinear weights, corner (y0, x0) first, then (y0, x0 + 1), (y0 + 1, x0),
// (y0 + 1, x0 + 1).
template <typename acc_t>
struct CornerWeights {
  acc_t w00, w01, w10, w11;
};

template <typename acc_t>
C10_HOST_DEVICE inline CornerWeights<acc_t> WeightsOf(const BilinearCell<acc_t>& c) {
  const acc_t hy = acc_t(1) - c.ly, hx = acc_t(1) - c.lx;
  return {hy * hx, hy * c.lx, c.ly * hx, c.ly * c.lx};
}

C10_HOST_DEVICE inline bool PixelInMap(int64_t y, int64_t x, int64_t height, int64_t width) {
  return y >= 0 && y < height && x >= 0 && x < width;
}

// The map's value at an integer pixel, 0 outside it (zero padding).
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline acc_t PixelOrZero(const scalar_t* plane, int64_t y, int64_t x,
                                         int64_t height, int64_t width) {
  return PixelInMap(y, x, height, width) ? static_cast<acc_t>(plane[y * width + x]) : acc_t(0);
}

// The four corner values of a cell (same order as CornerWeights), 0 outside the map.
template <typename acc_t>
struct CornerValues {
  acc_t v00, v01, v10, v11;
};

template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline CornerValues<acc_t> ReadCorners(const scalar_t* plane, int64_t height,
                                                       int64_t width,
                                                       const BilinearCell<acc_t>& c) {
  return {PixelOrZero<scalar_t, acc_t>(plane, c.y0, c.x0, height, width),
          PixelOrZero<scalar_t, acc_t>(plane, c.y0, c.x0 + 1, height, width),
          PixelOrZero<scalar_t, acc_t>(plane, c.y0 + 1, c.x0, height, width),
          PixelOrZero<scalar_t, acc_t>(plane, c.y0 + 1, c.x0 + 1, height, width)};
}

// The sample of one H×W plane at (y, x) under the forward border rule.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline acc_t SampleBilinear(const scalar_t* plane, int64_t height, int64_t width,
                                            acc_t y, acc_t x) {
  if (!InSamplingBox(y, x, height, width)) {
    return acc_t(0);
  }
  const BilinearCell<acc_t> c = CellOf(y, x);
  const CornerWeights<acc_t> w = WeightsOf(c);
  const CornerValues<acc_t> v = ReadCorners<scalar_t, acc_t>(plane, height, width, c);
  return w.w00 * v.v00 + w.w01 * v.v01 + w.w10 * v.v10 + w.w11 * v.v11;
}

// d(sample)/dy and d(sample)/dx of the zero-padded interpolant at (y, x), torchvision's
// offset-gradient rule: no box test, only the corners' validity, which makes the slopes 0
// outside [-1, H) × [-1, W) (tested first, so far-away or NaN points never reach CellOf).
template <typename acc_t>
struct BilinearSlopes {
  acc_t d_y, d_x;
};

template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline BilinearSlopes<acc_t> SampleSlopes(const scalar_t* plane, int64_t height,
                                                          int64_t width, acc_t y, acc_t x) {
  if (!(y >= acc_t(-1) && y < static_cast<acc_t>(height) && x >= acc_t(-1) &&
        x < static_cast<acc_t>(width))) {
    return {acc_t(0), acc_t(0)};
  }
  const BilinearCell<acc_t> c = CellOf(y, x);
  const CornerValues<acc_t> v = ReadCorners<scalar_t, acc_t>(plane, height, width, c);
  return {(acc_t(1) - c.lx) * (v.v10 - v.v00) + c.lx * (v.v11 - v.v01),
          (acc_t(1) - c.ly) * (v.v01 - v.v00) + c.ly * (v.v11 - v.v10)};
}

}  // namespace mrcnn::kernels
