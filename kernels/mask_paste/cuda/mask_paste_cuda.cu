// CUDA mask paste: one thread per output pixel, zero outside the pasted box.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/mask_paste/mask_paste_geometry.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

template <typename scalar_t>
__global__ void PasteKernel(int64_t total, const scalar_t* __restrict__ masks,
                            const float* __restrict__ boxes, int64_t r, int64_t padding,
                            float scale, int64_t height, int64_t width,
                            scalar_t* __restrict__ out) {
  const int64_t padded = r + 2 * padding;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t x = idx % width;
    const int64_t y = (idx / width) % height;
    const int64_t i = idx / width / height;
    const float* b = boxes + 4 * i;
    const PasteBox box = ComputePasteBox(b[0], b[1], b[2], b[3], scale);
    const bool inside = y >= max(box.y0, int64_t(0)) && y < min(box.y1 + 1, height) &&
                        x >= max(box.x0, int64_t(0)) && x < min(box.x1 + 1, width);
    if (!inside) {
      out[idx] = scalar_t(0);
      continue;
    }
    const LinearTap ty = ComputeLinearTap(y - box.y0, padded, box.h);
    const LinearTap tx = ComputeLinearTap(x - box.x0, padded, box.w);
    const scalar_t* mask = masks + i * r * r;
    auto at_padded = [&](int64_t py, int64_t px) -> float {
      py -= padding;
      px -= padding;
      if (py < 0 || py >= r || px < 0 || px >= r)
        return 0.f;
      return static_cast<float>(mask[py * r + px]);
    };
    const float top = __fadd_rn(__fmul_rn(tx.l0, at_padded(ty.i0, tx.i0)),
                                __fmul_rn(tx.l1, at_padded(ty.i0, tx.i1)));
    const float bottom = __fadd_rn(__fmul_rn(tx.l0, at_padded(ty.i1, tx.i0)),
                                   __fmul_rn(tx.l1, at_padded(ty.i1, tx.i1)));
    out[idx] = static_cast<scalar_t>(__fadd_rn(__fmul_rn(ty.l0, top), __fmul_rn(ty.l1, bottom)));
  }
}

at::Tensor PasteMasksCuda(const at::Tensor& masks_in, const at::Tensor& boxes_in,
                          int64_t image_height, int64_t image_width, int64_t padding) {
  const char* op = "mrcnn::paste_masks";
  TORCH_CHECK(masks_in.dim() == 4 && masks_in.size(1) == 1 && masks_in.size(2) == masks_in.size(3),
              op, ": masks must be N×1×R×R, got shape ", masks_in.sizes());
  TORCH_CHECK(boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == masks_in.size(0),
              op, ": boxes must be N×4 with one box per mask, got shape ", boxes_in.sizes());
  TORCH_CHECK(image_height >= 0 && image_width >= 0 && padding >= 0, op,
              ": image size and padding must be non-negative");
  TORCH_CHECK(masks_in.size(2) > 0, op, ": masks must have a positive resolution");
  const c10::cuda::CUDAGuard guard(masks_in.device());
  const at::Tensor masks = masks_in.contiguous();
  const at::Tensor boxes = boxes_in.to(masks.device(), at::kFloat).contiguous();
  const int64_t n = masks.size(0), r = masks.size(2);
  const float scale =
      static_cast<float>(static_cast<double>(r + 2 * padding) / static_cast<double>(r));
  at::Tensor out = at::empty({n, 1, image_height, image_width}, masks.options());
  const int64_t total = out.numel();
  if (total == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "mask_paste_cuda", [&] {
        const unsigned blocks =
            static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65536 * 4));
        PasteKernel<scalar_t><<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, masks.data_ptr<scalar_t>(), boxes.data_ptr<float>(), r, padding, scale,
            image_height, image_width, out.data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("paste_masks", &PasteMasksCuda);
}

}  // namespace mrcnn::kernels
