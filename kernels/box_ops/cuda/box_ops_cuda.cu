// CUDA box IoU and box encode/decode, one thread per output element / box.
// Round-to-nearest intrinsics keep the float results equal to the CPU kernels'.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/box_ops/box_formulas.h"
#include "kernels/box_ops/box_ops_args.h"
#include "kernels/box_ops/box_ops_torchvision.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void BoxIouKernel(int64_t n, int64_t m, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out) {
  const int64_t total = n * m;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* p = a + (idx / m) * 4;
    const T* q = b + (idx % m) * 4;
    out[idx] = BoxIou(p[0], p[1], p[2], p[3], BoxArea(p), q[0], q[1], q[2], q[3], BoxArea(q));
  }
}

template <typename T>
__global__ void EncodeKernel(int64_t n, const T* __restrict__ ref, const T* __restrict__ prop, T wx,
                             T wy, T ww, T wh, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    EncodeBox(ref + 4 * i, prop + 4 * i, wx, wy, ww, wh, out + 4 * i);
  }
}

template <typename T>
__global__ void DecodeKernel(int64_t n, int64_t k, const T* __restrict__ codes,
                             const T* __restrict__ boxes, T wx, T wy, T ww, T wh, T clip,
                             T* __restrict__ out) {
  const int64_t total = n * k;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    DecodeBox(DecodeAnchorOf(boxes + (idx / k) * 4), codes + idx * 4, wx, wy, ww, wh, clip,
              out + idx * 4);
  }
}

unsigned BlocksFor(int64_t total) {
  return static_cast<unsigned>(
      std::min<int64_t>(std::max<int64_t>((total + kThreads - 1) / kThreads, 1), 65536));
}

at::Tensor BoxIouCuda(const at::Tensor& a_in, const at::Tensor& b_in) {
  CheckIouBoxes(a_in, b_in, "mrcnn::box_iou");
  if (!KernelBoxes(a_in, b_in)) {
    return TorchvisionBoxIou(a_in, b_in);
  }
  const c10::cuda::CUDAGuard guard(a_in.device());
  const at::Tensor a = a_in.contiguous(), b = b_in.to(a_in.device()).contiguous();
  at::Tensor out = at::empty({a.size(0), b.size(0)}, a.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "mrcnn::box_iou", [&] {
    BoxIouKernel<scalar_t>
        <<<BlocksFor(out.numel()), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            a.size(0), b.size(0), a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
            out.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor EncodeBoxesCuda(const at::Tensor& reference_in, const at::Tensor& proposals_in,
                           at::ArrayRef<double> weights) {
  const char* op = "mrcnn::encode_boxes";
  CheckEncodeArgs(reference_in, proposals_in, weights, op);
  if (!KernelBoxes(reference_in, proposals_in)) {
    return TorchvisionEncodeBoxes(reference_in, proposals_in, weights);
  }
  const c10::cuda::CUDAGuard guard(reference_in.device());
  const at::Tensor ref = reference_in.contiguous();
  const at::Tensor prop = proposals_in.to(ref.device(), ref.scalar_type()).contiguous();
  at::Tensor out = at::empty({ref.size(0), 4}, ref.options());
  if (ref.size(0) == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(ref.scalar_type(), "box_ops_cuda", [&] {
    EncodeKernel<scalar_t>
        <<<BlocksFor(ref.size(0)), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            ref.size(0), ref.data_ptr<scalar_t>(), prop.data_ptr<scalar_t>(),
            static_cast<scalar_t>(weights[0]), static_cast<scalar_t>(weights[1]),
            static_cast<scalar_t>(weights[2]), static_cast<scalar_t>(weights[3]),
            out.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor DecodeBoxesCuda(const at::Tensor& codes_in, const at::Tensor& boxes_in,
                           at::ArrayRef<double> weights, double clamp) {
  const char* op = "mrcnn::decode_boxes";
  CheckDecodeArgs(codes_in, boxes_in, weights, op);
  if (!KernelDtype(codes_in)) {
    return TorchvisionDecodeBoxes(codes_in, boxes_in, weights, clamp);
  }
  const c10::cuda::CUDAGuard guard(codes_in.device());
  const at::Tensor codes = codes_in.contiguous();
  const at::Tensor boxes = boxes_in.to(codes.device(), codes.scalar_type()).contiguous();
  at::Tensor out = at::empty_like(codes);
  const int64_t n = codes.size(0), k = codes.size(1) / 4;
  if (n * k == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(codes.scalar_type(), "box_ops_cuda", [&] {
    DecodeKernel<scalar_t><<<BlocksFor(n * k), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        n, k, codes.data_ptr<scalar_t>(), boxes.data_ptr<scalar_t>(),
        static_cast<scalar_t>(weights[0]), static_cast<scalar_t>(weights[1]),
        static_cast<scalar_t>(weights[2]), static_cast<scalar_t>(weights[3]),
        static_cast<scalar_t>(clamp), out.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("box_iou", &BoxIouCuda);
  m.impl("encode_boxes", &EncodeBoxesCuda);
  m.impl("decode_boxes", &DecodeBoxesCuda);
}

}  // namespace mrcnn::kernels
