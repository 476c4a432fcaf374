// CUDA proposal matcher: one block per gt finds its best quality, then one thread
// per prediction finds its best gt, applies the thresholds and restores low-quality
// matches. No host synchronisation.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/matching/matcher_rules.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;

// Comparisons in the opmath type: exact for float16/bfloat16 (their values are
// exact in float) and free of the ambiguous half operators.
template <typename T>
__device__ inline at::opmath_type<T> Value(T v) {
  return static_cast<at::opmath_type<T>>(v);
}

template <typename T>
__device__ inline bool Beats(T candidate, T best) {
  return BeatsForMax(Value(candidate), Value(best));
}

template <typename T>
__global__ void GtBestKernel(int64_t n, const T* __restrict__ q, T* __restrict__ gt_best) {
  __shared__ T partial[kThreads];
  const T* row = q + blockIdx.x * n;
  T best = row[0];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    best = Beats(row[i], best) ? row[i] : best;
  }
  partial[threadIdx.x] = best;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      if (Beats(partial[threadIdx.x + s], partial[threadIdx.x])) {
        partial[threadIdx.x] = partial[threadIdx.x + s];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    gt_best[blockIdx.x] = partial[0];
  }
}

template <typename T>
__global__ void MatchKernel(int64_t g_count, int64_t n, const T* __restrict__ q,
                            const T* __restrict__ gt_best, T low, T high, bool allow_low_quality,
                            int64_t* __restrict__ out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  T best = q[i];
  int64_t arg = 0;
  bool low_quality = allow_low_quality && Value(q[i]) == Value(gt_best[0]);
  for (int64_t g = 1; g < g_count; ++g) {
    const T v = q[g * n + i];
    if (Beats(v, best)) {
      best = v;
      arg = g;
    }
    if (allow_low_quality && Value(v) == Value(gt_best[g])) {
      low_quality = true;
    }
  }
  out[i] = MatchFromBest(Value(best), arg, Value(low), Value(high), low_quality);
}

at::Tensor MatchProposalsCuda(const at::Tensor& quality_in, double high_threshold,
                              double low_threshold, bool allow_low_quality_matches) {
  const char* op = "mrcnn::match_proposals";
  CheckMatchArgs(quality_in, high_threshold, low_threshold, op);
  const c10::cuda::CUDAGuard guard(quality_in.device());
  const at::Tensor q = quality_in.contiguous();
  const int64_t g_count = q.size(0), n = q.size(1);
  at::Tensor out = at::empty({n}, q.options().dtype(at::kLong));
  at::Tensor gt_best = at::empty({g_count}, q.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "matcher_cuda", [&] {
    if (allow_low_quality_matches) {
      GtBestKernel<scalar_t><<<static_cast<unsigned>(g_count), kThreads, 0, stream>>>(
          n, q.data_ptr<scalar_t>(), gt_best.data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    MatchKernel<scalar_t>
        <<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
            g_count, n, q.data_ptr<scalar_t>(), gt_best.data_ptr<scalar_t>(),
            static_cast<scalar_t>(low_threshold), static_cast<scalar_t>(high_threshold),
            allow_low_quality_matches, out.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("match_proposals", &MatchProposalsCuda);
}

}  // namespace mrcnn::kernels
