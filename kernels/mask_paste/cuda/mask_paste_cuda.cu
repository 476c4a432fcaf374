// CUDA mask paste: one thread per output pixel, zero outside the pasted box.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/mask_paste/mask_paste_args.h"
#include "kernels/mask_paste/mask_paste_entry_points.h"
#include "kernels/mask_paste/mask_paste_geometry.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

// Output writers: the interpolated value itself, or 1/0 for value >= threshold compared in
// the mask dtype (paste_masks(...) >= threshold without the full-size float map).
template <typename scalar_t>
struct StoreValue {
  using out_t = scalar_t;
  __device__ out_t operator()(scalar_t v) const { return v; }
};

template <typename scalar_t>
struct StoreBinary {
  using out_t = uint8_t;
  scalar_t threshold;
  __device__ out_t operator()(scalar_t v) const {
    return static_cast<float>(v) >= static_cast<float>(threshold) ? 1 : 0;
  }
};

template <typename scalar_t, typename Store>
__global__ void PasteKernel(int64_t total, const scalar_t* __restrict__ masks,
                            const int64_t* __restrict__ boxes, int64_t r, int64_t padding,
                            int64_t height, int64_t width, typename Store::out_t* __restrict__ out,
                            Store store) {
  const int64_t padded = r + 2 * padding;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t x = idx % width;
    const int64_t y = (idx / width) % height;
    const int64_t i = idx / width / height;
    const PasteBox box = MakePasteBox(boxes + 4 * i);
    const bool inside = y >= max(box.y0, int64_t(0)) && y < min(box.y1 + 1, height) &&
                        x >= max(box.x0, int64_t(0)) && x < min(box.x1 + 1, width);
    if (!inside) {
      out[idx] = store(scalar_t(0));
      continue;
    }
    const LinearTap ty = ComputeLinearTap(y - box.y0, padded, box.h);
    const LinearTap tx = ComputeLinearTap(x - box.x0, padded, box.w);
    const scalar_t* mask = masks + i * r * r;
    auto at_padded = [&](int64_t py, int64_t px) {
      return PaddedMaskValue(mask, r, padding, py, px);
    };
    const float v =
        BilinearValue(at_padded(ty.i0, tx.i0), at_padded(ty.i0, tx.i1), at_padded(ty.i1, tx.i0),
                      at_padded(ty.i1, tx.i1), ty, tx, SmallOutputKernel(box.h, box.w));
    out[idx] = store(static_cast<scalar_t>(v));
  }
}

// binary: uint8 output of value >= threshold; otherwise the values in the mask dtype.
at::Tensor Paste(const char* op, const at::Tensor& masks_in, const at::Tensor& boxes_in,
                 int64_t image_height, int64_t image_width, int64_t padding, bool binary,
                 double threshold) {
  CheckPasteArgs(op, masks_in, boxes_in, image_height, image_width, padding);
  const c10::cuda::CUDAGuard guard(masks_in.device());
  const at::Tensor masks = masks_in.contiguous();
  const int64_t n = masks.size(0), r = masks.size(2);
  const at::Tensor boxes = PasteBoxes(boxes_in, r, padding).to(masks.device()).contiguous();
  at::Tensor out = at::empty({n, 1, image_height, image_width},
                             binary ? masks.options().dtype(at::kByte) : masks.options());
  const int64_t total = out.numel();
  if (total == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "mask_paste_cuda", [&] {
        const unsigned blocks =
            static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65536 * 4));
        auto stream = at::cuda::getCurrentCUDAStream();
        if (binary) {
          const StoreBinary<scalar_t> store{static_cast<scalar_t>(threshold)};
          PasteKernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
              total, masks.data_ptr<scalar_t>(), boxes.data_ptr<int64_t>(), r, padding,
              image_height, image_width, out.data_ptr<uint8_t>(), store);
        } else {
          PasteKernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
              total, masks.data_ptr<scalar_t>(), boxes.data_ptr<int64_t>(), r, padding,
              image_height, image_width, out.data_ptr<scalar_t>(), StoreValue<scalar_t>{});
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("paste_masks", &MaskPasteOps<&Paste>::Probabilities);
  m.impl("paste_masks_binary", &MaskPasteOps<&Paste>::Binary);
}

}  // namespace mrcnn::kernels
