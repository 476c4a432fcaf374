// CPU deformable convolution (torchvision.ops.deform_conv2d semantics, DCN v1 and v2): the
// three sampling kernels of the im2col + GEMM driver in deform_conv_entry_points.h. Each
// parallel task owns whole output rows or planes, so nothing is written by two threads and
// the results do not depend on the thread count.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "kernels/deform_conv/deform_conv_entry_points.h"
#include "kernels/deform_conv/deform_conv_sampling.h"

namespace mrcnn::kernels {
namespace {

// Pointers to image b's offsets and mask (nullptr for v1).
template <typename scalar_t>
struct ImageSampling {
  const scalar_t* offset;
  const scalar_t* mask;
};

template <typename scalar_t>
ImageSampling<scalar_t> SamplingOf(const scalar_t* offset, const scalar_t* mask,
                                   const DeformConvShape& s, int64_t b) {
  const int64_t pixels = s.out_pixels();
  return {offset + b * s.offset_channels() * pixels,
          mask != nullptr ? mask + b * s.mask_channels() * pixels : nullptr};
}

template <typename scalar_t>
const scalar_t* DataOrNull(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<scalar_t>() : nullptr;
}

template <typename scalar_t>
void Im2ColRows(const scalar_t* input, const scalar_t* offset, const scalar_t* mask,
                const DeformConvShape& s, int64_t n, scalar_t* columns) {
  const int64_t taps = s.taps(), pixels = s.out_pixels(), per_group = s.channels_per_offset_group();
  at::parallel_for(0, s.channels * taps, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row / taps, tap = row % taps, g = c / per_group;
      scalar_t* out = columns + row * n * pixels;
      for (int64_t b = 0; b < n; ++b) {
        const scalar_t* plane = input + (b * s.channels + c) * s.height * s.width;
        const ImageSampling<scalar_t> im = SamplingOf(offset, mask, s, b);
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          for (int64_t ow = 0; ow < s.out_w; ++ow) {
            const auto t = TapSample<scalar_t, scalar_t>(s, im.offset, im.mask, g, tap, oh, ow);
            out[b * pixels + oh * s.out_w + ow] =
                t.mask * SampleBilinear<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
          }
        }
      }
    }
  });
}

at::Tensor Im2ColCpu(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                     const DeformConvShape& s) {
  const int64_t n = input.size(0);
  at::Tensor columns = at::empty({s.channels * s.taps(), n * s.out_pixels()}, input.options());
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "deform_conv2d_im2col_cpu", [&] {
    Im2ColRows<scalar_t>(input.const_data_ptr<scalar_t>(), offset.const_data_ptr<scalar_t>(),
                         DataOrNull<scalar_t>(mask), s, n, columns.mutable_data_ptr<scalar_t>());
  });
  return columns;
}

// Scatters one tap's column gradient (already times the mask) into a plane's four corners.
template <typename scalar_t>
void ScatterSample(scalar_t* plane, const DeformConvShape& s, scalar_t y, scalar_t x,
                   scalar_t value) {
  if (!InSamplingBox(y, x, s.height, s.width)) {
    return;
  }
  const BilinearCell<scalar_t> c = CellOf(y, x);
  const CornerWeights<scalar_t> w = WeightsOf(c);
  const scalar_t weights[4] = {w.w00, w.w01, w.w10, w.w11};
  for (int corner = 0; corner < 4; ++corner) {
    const int64_t yy = c.y0 + corner / 2, xx = c.x0 + corner % 2;
    if (PixelInMap(yy, xx, s.height, s.width)) {
      plane[yy * s.width + xx] += weights[corner] * value;
    }
  }
}

template <typename scalar_t>
void Col2ImPlanes(const scalar_t* grad_columns, const scalar_t* offset, const scalar_t* mask,
                  const DeformConvShape& s, int64_t n, scalar_t* grad_input) {
  const int64_t taps = s.taps(), pixels = s.out_pixels(), per_group = s.channels_per_offset_group();
  at::parallel_for(0, n * s.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane_index = begin; plane_index < end; ++plane_index) {
      const int64_t b = plane_index / s.channels, c = plane_index % s.channels, g = c / per_group;
      scalar_t* plane = grad_input + plane_index * s.height * s.width;
      const ImageSampling<scalar_t> im = SamplingOf(offset, mask, s, b);
      for (int64_t tap = 0; tap < taps; ++tap) {
        const scalar_t* grad_row = grad_columns + (c * taps + tap) * n * pixels + b * pixels;
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          for (int64_t ow = 0; ow < s.out_w; ++ow) {
            const auto t = TapSample<scalar_t, scalar_t>(s, im.offset, im.mask, g, tap, oh, ow);
            ScatterSample(plane, s, t.y, t.x, grad_row[oh * s.out_w + ow] * t.mask);
          }
        }
      }
    }
  });
}

void Col2ImCpu(const at::Tensor& grad_columns, const at::Tensor& offset, const at::Tensor& mask,
               const DeformConvShape& s, at::Tensor& grad_input) {
  AT_DISPATCH_FLOATING_TYPES(grad_columns.scalar_type(), "deform_conv2d_col2im_cpu", [&] {
    Col2ImPlanes<scalar_t>(grad_columns.const_data_ptr<scalar_t>(),
                           offset.const_data_ptr<scalar_t>(), DataOrNull<scalar_t>(mask), s,
                           grad_input.size(0), grad_input.mutable_data_ptr<scalar_t>());
  });
}

// Output rows of one (image, deformable group, tap): the y and x offset gradients and, for
// v2, the mask gradient, each out_h·out_w long.
template <typename scalar_t>
struct TapGradRows {
  scalar_t* d_y;
  scalar_t* d_x;
  scalar_t* d_mask;  // nullptr for v1
};

// Sums, over the channels of deformable group g, each channel's contribution to one tap's
// offset and mask gradients (channel outer, pixel inner: rows are read contiguously).
template <typename scalar_t>
void AccumulateTapGrads(const scalar_t* grad_columns, const scalar_t* input,
                        const ImageSampling<scalar_t>& im, const DeformConvShape& s, int64_t n,
                        int64_t b, int64_t g, int64_t tap, const TapGradRows<scalar_t>& out) {
  const int64_t taps = s.taps(), pixels = s.out_pixels(), per_group = s.channels_per_offset_group();
  for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c) {
    const scalar_t* plane = input + (b * s.channels + c) * s.height * s.width;
    const scalar_t* grad_row = grad_columns + (c * taps + tap) * n * pixels + b * pixels;
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        const int64_t p = oh * s.out_w + ow;
        const auto t = TapSample<scalar_t, scalar_t>(s, im.offset, im.mask, g, tap, oh, ow);
        const auto slopes = SampleSlopes<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
        const scalar_t scaled = grad_row[p] * t.mask;
        out.d_y[p] += scaled * slopes.d_y;
        out.d_x[p] += scaled * slopes.d_x;
        if (out.d_mask != nullptr) {
          out.d_mask[p] +=
              grad_row[p] * SampleBilinear<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
        }
      }
    }
  }
}

template <typename scalar_t>
void OffsetMaskGradRows(const scalar_t* grad_columns, const scalar_t* input, const scalar_t* offset,
                        const scalar_t* mask, const DeformConvShape& s, int64_t n,
                        scalar_t* grad_offset, scalar_t* grad_mask) {
  const int64_t taps = s.taps(), pixels = s.out_pixels();
  at::parallel_for(0, n * s.offset_groups * taps, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t tap = task % taps, g = (task / taps) % s.offset_groups;
      const int64_t b = task / taps / s.offset_groups;
      const int64_t cy = OffsetChannelY(g, tap, taps);
      scalar_t* offset_rows = grad_offset + (b * s.offset_channels() + cy) * pixels;
      scalar_t* mask_row =
          grad_mask != nullptr
              ? grad_mask + (b * s.mask_channels() + MaskChannel(g, tap, taps)) * pixels
              : nullptr;
      std::fill(offset_rows, offset_rows + 2 * pixels, scalar_t(0));
      if (mask_row != nullptr) {
        std::fill(mask_row, mask_row + pixels, scalar_t(0));
      }
      AccumulateTapGrads(grad_columns, input, SamplingOf(offset, mask, s, b), s, n, b, g, tap,
                         TapGradRows<scalar_t>{offset_rows, offset_rows + pixels, mask_row});
    }
  });
}

void OffsetMaskGradCpu(const at::Tensor& grad_columns, const at::Tensor& input,
                       const at::Tensor& offset, const at::Tensor& mask, const DeformConvShape& s,
                       at::Tensor& grad_offset, at::Tensor& grad_mask) {
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "deform_conv2d_offset_grad_cpu", [&] {
    OffsetMaskGradRows<scalar_t>(
        grad_columns.const_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(),
        offset.const_data_ptr<scalar_t>(), DataOrNull<scalar_t>(mask), s, input.size(0),
        grad_offset.mutable_data_ptr<scalar_t>(),
        grad_mask.defined() ? grad_mask.mutable_data_ptr<scalar_t>() : nullptr);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  using Ops = DeformConvOps<&Im2ColCpu, &Col2ImCpu, &OffsetMaskGradCpu>;
  m.impl("deform_conv2d", &Ops::Forward);
  m.impl("_deform_conv2d_backward", &Ops::Backward);
}

}  // namespace mrcnn::kernels
