// CUDA box IoU and box encode/decode, one thread per output element / box.
// Round-to-nearest intrinsics keep the float results equal to the CPU kernels'.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/box_ops/box_ops_args.h"
#include "kernels/box_ops/box_ops_torchvision.h"
#include "kernels/std_min_max.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

__device__ inline float Sub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline float Add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline float Mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline float Div(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ inline double Sub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline double Add(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline double Mul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline double Div(double a, double b) {
  return __ddiv_rn(a, b);
}

template <typename T>
__global__ void BoxIouKernel(int64_t n, int64_t m, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out) {
  const int64_t total = n * m;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* p = a + (idx / m) * 4;
    const T* q = b + (idx % m) * 4;
    const T area_p = Mul(Sub(p[2], p[0]), Sub(p[3], p[1]));
    const T area_q = Mul(Sub(q[2], q[0]), Sub(q[3], q[1]));
    const T w = StdMax(Sub(StdMin(p[2], q[2]), StdMax(p[0], q[0])), T(0));
    const T h = StdMax(Sub(StdMin(p[3], q[3]), StdMax(p[1], q[1])), T(0));
    const T inter = Mul(w, h);
    out[idx] = Div(inter, Sub(Add(area_p, area_q), inter));
  }
}

template <typename T>
__global__ void EncodeKernel(int64_t n, const T* __restrict__ ref, const T* __restrict__ prop, T wx,
                             T wy, T ww, T wh, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* p = prop + 4 * i;
    const T* r = ref + 4 * i;
    const T half = 0.5;
    const T ex_w = Sub(p[2], p[0]), ex_h = Sub(p[3], p[1]);
    const T ex_cx = Add(p[0], Mul(half, ex_w)), ex_cy = Add(p[1], Mul(half, ex_h));
    const T gt_w = Sub(r[2], r[0]), gt_h = Sub(r[3], r[1]);
    const T gt_cx = Add(r[0], Mul(half, gt_w)), gt_cy = Add(r[1], Mul(half, gt_h));
    out[4 * i] = Div(Mul(wx, Sub(gt_cx, ex_cx)), ex_w);
    out[4 * i + 1] = Div(Mul(wy, Sub(gt_cy, ex_cy)), ex_h);
    out[4 * i + 2] = Mul(ww, log(Div(gt_w, ex_w)));
    out[4 * i + 3] = Mul(wh, log(Div(gt_h, ex_h)));
  }
}

template <typename T>
__global__ void DecodeKernel(int64_t n, int64_t k, const T* __restrict__ codes,
                             const T* __restrict__ boxes, T wx, T wy, T ww, T wh, T clip,
                             T* __restrict__ out) {
  const int64_t total = n * k;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* b = boxes + (idx / k) * 4;
    const T* c = codes + idx * 4;
    T* o = out + idx * 4;
    const T half = 0.5;
    const T w = Sub(b[2], b[0]), h = Sub(b[3], b[1]);
    const T cx = Add(b[0], Mul(half, w)), cy = Add(b[1], Mul(half, h));
    const T dx = Div(c[0], wx), dy = Div(c[1], wy);
    const T dw = StdMin(Div(c[2], ww), clip), dh = StdMin(Div(c[3], wh), clip);
    const T pcx = Add(Mul(dx, w), cx), pcy = Add(Mul(dy, h), cy);
    const T half_w = Mul(half, Mul(exp(dw), w)), half_h = Mul(half, Mul(exp(dh), h));
    o[0] = Sub(pcx, half_w);
    o[1] = Sub(pcy, half_h);
    o[2] = Add(pcx, half_w);
    o[3] = Add(pcy, half_h);
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
  CheckBoxes(reference_in, op, "reference_boxes");
  CheckBoxes(proposals_in, op, "proposals");
  CheckWeights(weights, op);
  TORCH_CHECK(reference_in.size(0) == proposals_in.size(0), op,
              ": reference_boxes and proposals must have the same number of rows");
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
  CheckBoxes(boxes_in, op, "boxes");
  CheckWeights(weights, op);
  TORCH_CHECK(
      codes_in.dim() == 2 && codes_in.size(0) == boxes_in.size(0) && codes_in.size(1) % 4 == 0, op,
      ": rel_codes must be N×4k with N = boxes rows (", boxes_in.size(0), "), got shape ",
      codes_in.sizes());
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
