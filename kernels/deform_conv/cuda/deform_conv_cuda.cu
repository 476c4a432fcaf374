// CUDA deformable convolution (torchvision.ops.deform_conv2d semantics, DCN v1 and v2): the
// three sampling kernels of the im2col + GEMM driver in deform_conv_entry_points.h, with the
// CPU twin's arithmetic from deform_conv_sampling.h. One thread per column element (im2col,
// col2im) or per (image, deformable group, tap, output pixel) (offset and mask gradients);
// neighbouring threads take neighbouring output pixels, so the offsets, mask and columns are
// read and written coalesced. col2im adds into the input gradient with atomics, so its sums
// are ordered differently from the CPU's (within the kernel tests' tolerance).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <ATen/cuda/Atomic.cuh>
#include <algorithm>
#include <cstdint>

#include "kernels/deform_conv/deform_conv_entry_points.h"
#include "kernels/deform_conv/deform_conv_sampling.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

unsigned BlocksFor(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65536));
}

// Where column element `index` of n images lies: row c·taps + tap, image b, output pixel p.
struct ColumnPosition {
  int64_t c, tap, b, oh, ow;
  __device__ ColumnPosition(int64_t index, const DeformConvShape& s, int64_t n) {
    const int64_t pixels = s.out_pixels();
    const int64_t p = index % pixels;
    b = (index / pixels) % n;
    const int64_t row = index / pixels / n;
    c = row / s.taps();
    tap = row % s.taps();
    oh = p / s.out_w;
    ow = p % s.out_w;
  }
};

template <typename scalar_t>
__device__ inline DeformSample<scalar_t> ColumnSample(const DeformConvShape& s,
                                                      const scalar_t* offset, const scalar_t* mask,
                                                      const ColumnPosition& pos) {
  const int64_t pixels = s.out_pixels();
  const scalar_t* image_offset = offset + pos.b * s.offset_channels() * pixels;
  const scalar_t* image_mask =
      mask != nullptr ? mask + pos.b * s.mask_channels() * pixels : nullptr;
  return TapSample<scalar_t, scalar_t>(
      s, image_offset, image_mask, pos.c / s.channels_per_offset_group(), pos.tap, pos.oh, pos.ow);
}

template <typename scalar_t>
__global__ void Im2ColKernel(int64_t total, DeformConvShape s, int64_t n,
                             const scalar_t* __restrict__ input,
                             const scalar_t* __restrict__ offset, const scalar_t* __restrict__ mask,
                             scalar_t* __restrict__ columns) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const ColumnPosition pos(index, s, n);
    const DeformSample<scalar_t> t = ColumnSample(s, offset, mask, pos);
    const scalar_t* plane = input + (pos.b * s.channels + pos.c) * s.height * s.width;
    columns[index] =
        t.mask * SampleBilinear<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
  }
}

template <typename scalar_t>
__global__ void Col2ImKernel(int64_t total, DeformConvShape s, int64_t n,
                             const scalar_t* __restrict__ grad_columns,
                             const scalar_t* __restrict__ offset, const scalar_t* __restrict__ mask,
                             scalar_t* __restrict__ grad_input) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const ColumnPosition pos(index, s, n);
    const DeformSample<scalar_t> t = ColumnSample(s, offset, mask, pos);
    if (!InSamplingBox(t.y, t.x, s.height, s.width)) {
      continue;
    }
    const scalar_t value = grad_columns[index] * t.mask;
    const BilinearCell<scalar_t> cell = CellOf(t.y, t.x);
    const CornerWeights<scalar_t> w = WeightsOf(cell);
    const scalar_t weights[4] = {w.w00, w.w01, w.w10, w.w11};
    scalar_t* plane = grad_input + (pos.b * s.channels + pos.c) * s.height * s.width;
    for (int corner = 0; corner < 4; ++corner) {
      const int64_t yy = cell.y0 + corner / 2, xx = cell.x0 + corner % 2;
      if (PixelInMap(yy, xx, s.height, s.width)) {
        gpuAtomicAdd(plane + yy * s.width + xx, weights[corner] * value);
      }
    }
  }
}

// One thread per (image b, deformable group g, tap, output pixel p), summing over g's channels.
template <typename scalar_t>
__global__ void OffsetMaskGradKernel(int64_t total, DeformConvShape s, int64_t n,
                                     const scalar_t* __restrict__ grad_columns,
                                     const scalar_t* __restrict__ input,
                                     const scalar_t* __restrict__ offset,
                                     const scalar_t* __restrict__ mask,
                                     scalar_t* __restrict__ grad_offset,
                                     scalar_t* __restrict__ grad_mask) {
  const int64_t taps = s.taps(), pixels = s.out_pixels(), per_group = s.channels_per_offset_group();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t p = index % pixels, tap = (index / pixels) % taps;
    const int64_t g = (index / pixels / taps) % s.offset_groups;
    const int64_t b = index / pixels / taps / s.offset_groups;
    const scalar_t* image_mask = mask != nullptr ? mask + b * s.mask_channels() * pixels : nullptr;
    const DeformSample<scalar_t> t = TapSample<scalar_t, scalar_t>(
        s, offset + b * s.offset_channels() * pixels, image_mask, g, tap, p / s.out_w, p % s.out_w);
    scalar_t d_y = 0, d_x = 0, d_mask = 0;
    for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c) {
      const scalar_t* plane = input + (b * s.channels + c) * s.height * s.width;
      const scalar_t grad = grad_columns[(c * taps + tap) * n * pixels + b * pixels + p];
      const auto slopes = SampleSlopes<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
      d_y += grad * t.mask * slopes.d_y;
      d_x += grad * t.mask * slopes.d_x;
      if (grad_mask != nullptr) {
        d_mask += grad * SampleBilinear<scalar_t, scalar_t>(plane, s.height, s.width, t.y, t.x);
      }
    }
    const int64_t cy = OffsetChannelY(g, tap, taps);
    grad_offset[(b * s.offset_channels() + cy) * pixels + p] = d_y;
    grad_offset[(b * s.offset_channels() + cy + 1) * pixels + p] = d_x;
    if (grad_mask != nullptr) {
      grad_mask[(b * s.mask_channels() + MaskChannel(g, tap, taps)) * pixels + p] = d_mask;
    }
  }
}

template <typename scalar_t>
const scalar_t* DataOrNull(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<scalar_t>() : nullptr;
}

at::Tensor Im2ColCuda(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                      const DeformConvShape& s) {
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t n = input.size(0);
  at::Tensor columns = at::empty({s.channels * s.taps(), n * s.out_pixels()}, input.options());
  const int64_t total = columns.numel();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "deform_conv2d_im2col_cuda", [&] {
    Im2ColKernel<scalar_t><<<BlocksFor(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        total, s, n, input.const_data_ptr<scalar_t>(), offset.const_data_ptr<scalar_t>(),
        DataOrNull<scalar_t>(mask), columns.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return columns;
}

void Col2ImCuda(const at::Tensor& grad_columns, const at::Tensor& offset, const at::Tensor& mask,
                const DeformConvShape& s, at::Tensor& grad_input) {
  const c10::cuda::CUDAGuard guard(grad_columns.device());
  const int64_t total = grad_columns.numel();
  AT_DISPATCH_FLOATING_TYPES(grad_columns.scalar_type(), "deform_conv2d_col2im_cuda", [&] {
    Col2ImKernel<scalar_t><<<BlocksFor(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        total, s, grad_input.size(0), grad_columns.const_data_ptr<scalar_t>(),
        offset.const_data_ptr<scalar_t>(), DataOrNull<scalar_t>(mask),
        grad_input.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void OffsetMaskGradCuda(const at::Tensor& grad_columns, const at::Tensor& input,
                        const at::Tensor& offset, const at::Tensor& mask, const DeformConvShape& s,
                        at::Tensor& grad_offset, at::Tensor& grad_mask) {
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t n = input.size(0);
  const int64_t total = n * s.offset_groups * s.taps() * s.out_pixels();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "deform_conv2d_offset_grad_cuda", [&] {
    OffsetMaskGradKernel<scalar_t>
        <<<BlocksFor(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, s, n, grad_columns.const_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(),
            offset.const_data_ptr<scalar_t>(), DataOrNull<scalar_t>(mask),
            grad_offset.mutable_data_ptr<scalar_t>(),
            grad_mask.defined() ? grad_mask.mutable_data_ptr<scalar_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  using Ops = DeformConvOps<&Im2ColCuda, &Col2ImCuda, &OffsetMaskGradCuda>;
  m.impl("deform_conv2d", &Ops::Forward);
  m.impl("_deform_conv2d_backward", &Ops::Backward);
}

}  // namespace mrcnn::kernels
