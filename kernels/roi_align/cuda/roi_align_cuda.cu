// CUDA ROIAlign forward/backward for one level and for FPN levels (a roi's level
// picks its feature map from a small table passed by value). One thread per output
// element; float accumulation for half/bfloat16; atomics in the backward pass.
// Channels-last maps (every level, FeaturesChannelsLast) are read in place with the channel
// fastest across threads: neighbouring threads read, and in the backward pass add to,
// neighbouring addresses; the output (and, when asked, the maps' gradients) is channels-last
// too. Planar maps keep the planar kernels.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <ATen/cuda/Atomic.cuh>
#include <vector>

#include "kernels/roi_align/roi_align_args.h"
#include "kernels/roi_align/roi_align_entry_points.h"
#include "kernels/roi_align/roi_align_sampling.h"

namespace mrcnn::kernels {
namespace {

constexpr int kMaxLevels = 8;
constexpr int kThreads = 256;

template <typename scalar_t, typename acc_t>
struct LevelTable {
  const scalar_t* data[kMaxLevels];
  acc_t* grad[kMaxLevels];
  int64_t height[kMaxLevels];
  int64_t width[kMaxLevels];
  acc_t scale[kMaxLevels];
  int count;
};

// Output element `index` of K×C×PH×PW in planar order (n, c, ph, pw) or channels-last order
// (n, ph, pw, c): the order the output is stored in, so index is also its offset.
template <bool kChannelsLast>
struct OutputPosition {
  int64_t n, c;
  int ph, pw;
  __device__ OutputPosition(int64_t index, int64_t channels, int pooled_h, int pooled_w) {
    if constexpr (kChannelsLast) {
      c = index % channels;
      pw = static_cast<int>((index / channels) % pooled_w);
      ph = static_cast<int>((index / channels / pooled_w) % pooled_h);
      n = index / channels / pooled_w / pooled_h;
    } else {
      pw = static_cast<int>(index % pooled_w);
      ph = static_cast<int>((index / pooled_w) % pooled_h);
      c = (index / pooled_w / pooled_h) % channels;
      n = index / pooled_w / pooled_h / channels;
    }
  }
};

// Where channel c of image b's map starts, and the distance between two pixels of it.
template <bool kChannelsLast>
__device__ inline int64_t PlaneStart(int64_t b, int64_t c, int64_t channels, int64_t height,
                                     int64_t width) {
  return kChannelsLast ? b * height * width * channels + c : (b * channels + c) * height * width;
}
template <bool kChannelsLast>
__device__ inline int64_t PixelStride(int64_t channels) {
  return kChannelsLast ? channels : 1;
}

template <typename scalar_t, typename acc_t, bool kChannelsLast>
__global__ void ForwardKernel(int64_t total, LevelTable<scalar_t, acc_t> table,
                              const int64_t* __restrict__ levels, const scalar_t* __restrict__ rois,
                              int64_t batch, int64_t channels, int pooled_h, int pooled_w,
                              int sampling_ratio, bool aligned, scalar_t* __restrict__ out) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const OutputPosition<kChannelsLast> pos(index, channels, pooled_h, pooled_w);
    const int pw = pos.pw, ph = pos.ph;
    const int64_t c = pos.c, n = pos.n;
    const int l = levels ? static_cast<int>(levels[n]) : 0;
    const scalar_t* roi = rois + n * 5;
    if (l < 0 || l >= table.count) {
      out[index] = scalar_t(0);  // invalid level: documented as a zero output on CUDA
      continue;
    }
    const auto g =
        ComputeRoiGeometry<int>(roi, table.scale[l], pooled_h, pooled_w, sampling_ratio, aligned);
    if (g.batch < 0 || g.batch >= batch || TooManySamples(pooled_h, pooled_w, g.grid_h, g.grid_w)) {
      out[index] = scalar_t(0);  // rejected on CPU; checking here would need a sync
      continue;
    }
    const int64_t height = table.height[l], width = table.width[l];
    const scalar_t* in =
        table.data[l] + PlaneStart<kChannelsLast>(g.batch, c, channels, height, width);
    const int64_t step = PixelStride<kChannelsLast>(channels);
    acc_t v = 0;
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const acc_t y = SamplePosition(g.start_h, g.bin_h, ph, iy, g.grid_h);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const acc_t x = SamplePosition(g.start_w, g.bin_w, pw, ix, g.grid_w);
        const auto t = ComputeBilinearTaps(y, x, height, width);
        if (t.valid) {
          v += t.w1 * static_cast<acc_t>(in[t.p1 * step]) +
               t.w2 * static_cast<acc_t>(in[t.p2 * step]) +
               t.w3 * static_cast<acc_t>(in[t.p3 * step]) +
               t.w4 * static_cast<acc_t>(in[t.p4 * step]);
        } else {
          v += t.w1;  // 0 outside the map, NaN for a NaN coordinate
        }
      }
    }
    out[index] = static_cast<scalar_t>(v / g.count);
  }
}

// kChannelsLast: the maps' gradients are channels-last, and threads walk the output's
// elements channel fastest (the incoming gradient is read through its strides either way).
template <typename scalar_t, typename acc_t, bool kChannelsLast>
__global__ void BackwardKernel(int64_t total, LevelTable<scalar_t, acc_t> table,
                               const int64_t* __restrict__ levels,
                               const scalar_t* __restrict__ rois, const scalar_t* __restrict__ grad,
                               int64_t sn, int64_t sc, int64_t sh, int64_t sw, int64_t batch,
                               int64_t channels, int pooled_h, int pooled_w, int sampling_ratio,
                               bool aligned) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const OutputPosition<kChannelsLast> pos(index, channels, pooled_h, pooled_w);
    const int pw = pos.pw, ph = pos.ph;
    const int64_t c = pos.c, n = pos.n;
    const int l = levels ? static_cast<int>(levels[n]) : 0;
    if (l < 0 || l >= table.count) {
      continue;
    }
    const auto g = ComputeRoiGeometry<int>(rois + n * 5, table.scale[l], pooled_h, pooled_w,
                                           sampling_ratio, aligned);
    if (g.batch < 0 || g.batch >= batch || TooManySamples(pooled_h, pooled_w, g.grid_h, g.grid_w)) {
      continue;
    }
    const int64_t height = table.height[l], width = table.width[l];
    acc_t* gin = table.grad[l] + PlaneStart<kChannelsLast>(g.batch, c, channels, height, width);
    const int64_t step = PixelStride<kChannelsLast>(channels);
    const acc_t gbin = static_cast<acc_t>(grad[n * sn + c * sc + ph * sh + pw * sw]);
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const acc_t y = SamplePosition(g.start_h, g.bin_h, ph, iy, g.grid_h);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const acc_t x = SamplePosition(g.start_w, g.bin_w, pw, ix, g.grid_w);
        const auto t = ComputeBilinearTaps(y, x, height, width);
        if (t.valid) {
          gpuAtomicAdd(gin + t.p1 * step, gbin * t.w1 / g.count);
          gpuAtomicAdd(gin + t.p2 * step, gbin * t.w2 / g.count);
          gpuAtomicAdd(gin + t.p3 * step, gbin * t.w3 / g.count);
          gpuAtomicAdd(gin + t.p4 * step, gbin * t.w4 / g.count);
        }
      }
    }
  }
}

unsigned BlocksFor(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65536));
}

at::Tensor ForwardCuda(const std::vector<at::Tensor>& features_in, const at::Tensor& rois_in,
                       const at::Tensor& levels_in, const std::vector<double>& scales,
                       int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                       const char* op) {
  CheckRois(rois_in, op);
  CheckPooling(pooled_h, pooled_w, sampling_ratio, op);
  CheckLevelFeatures(features_in, rois_in, op);
  TORCH_CHECK(rois_in.is_cuda(), op, ": rois must be a CUDA tensor");
  TORCH_CHECK(scales.size() == features_in.size(), op, ": got ", scales.size(), " scales for ",
              features_in.size(), " feature levels");
  const c10::cuda::CUDAGuard guard(rois_in.device());
  const bool channels_last = FeaturesChannelsLast(features_in);
  std::vector<at::Tensor> features;
  for (const auto& f : features_in) {
    features.push_back(channels_last ? f : f.contiguous());
  }
  const at::Tensor rois = rois_in.contiguous();
  const int64_t num_rois = rois.size(0);
  const int64_t batch = features[0].size(0), channels = features[0].size(1);
  at::Tensor out =
      at::empty({num_rois, channels, pooled_h, pooled_w},
                features[0].options().memory_format(channels_last ? at::MemoryFormat::ChannelsLast
                                                                  : at::MemoryFormat::Contiguous));
  const int64_t total = out.numel();
  if (total == 0) {
    return out;
  }
  at::Tensor levels;
  if (levels_in.defined()) {
    levels = levels_in.to(rois.device(), at::kLong).contiguous();
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, rois.scalar_type(), "roi_align_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        LevelTable<scalar_t, acc_t> table{};
        table.count = static_cast<int>(features.size());
        for (size_t l = 0; l < features.size(); ++l) {
          table.data[l] = features[l].data_ptr<scalar_t>();
          table.height[l] = features[l].size(2);
          table.width[l] = features[l].size(3);
          table.scale[l] = static_cast<acc_t>(scales[l]);
        }
        auto* kernel = channels_last ? &ForwardKernel<scalar_t, acc_t, true>
                                     : &ForwardKernel<scalar_t, acc_t, false>;
        kernel<<<BlocksFor(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, table, levels.defined() ? levels.data_ptr<int64_t>() : nullptr,
            rois.data_ptr<scalar_t>(), batch, channels, static_cast<int>(pooled_h),
            static_cast<int>(pooled_w), static_cast<int>(std::max<int64_t>(sampling_ratio, 0)),
            aligned, out.data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

std::vector<at::Tensor> BackwardCuda(const at::Tensor& grad, const at::Tensor& rois_in,
                                     const at::Tensor& levels_in, const std::vector<double>& scales,
                                     at::IntArrayRef feature_shapes, int64_t pooled_h,
                                     int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                                     bool channels_last, const char* op) {
  CheckRois(rois_in, op);
  CheckPooling(pooled_h, pooled_w, sampling_ratio, op);
  const int64_t num_levels = static_cast<int64_t>(scales.size());
  TORCH_CHECK(num_levels >= 1 && num_levels <= kMaxLevels, op, ": 1 to ", kMaxLevels,
              " levels are supported, got ", num_levels);
  TORCH_CHECK(static_cast<int64_t>(feature_shapes.size()) == 4 * num_levels, op,
              ": feature_shapes must hold B,C,H,W for each level");
  TORCH_CHECK(grad.is_cuda() && grad.dim() == 4 && grad.size(0) == rois_in.size(0), op,
              ": grad must be a CUDA K×C×pooled_h×pooled_w tensor");
  const c10::cuda::CUDAGuard guard(grad.device());
  const at::Tensor rois = rois_in.to(grad.scalar_type()).contiguous();
  const int64_t batch = feature_shapes[0], channels = feature_shapes[1];
  at::Tensor levels;
  if (levels_in.defined()) {
    levels = levels_in.to(grad.device(), at::kLong).contiguous();
  }
  const auto acc_dtype = at::toOpMathType(grad.scalar_type());
  std::vector<at::Tensor> grads;
  for (int64_t l = 0; l < num_levels; ++l) {
    grads.push_back(
        at::empty(feature_shapes.slice(4 * l, 4), grad.options().dtype(acc_dtype),
                  channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous)
            .zero_());
  }
  const int64_t total = grad.numel();
  if (total > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, grad.scalar_type(), "roi_align_cuda", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          LevelTable<scalar_t, acc_t> table{};
          table.count = static_cast<int>(num_levels);
          for (int64_t l = 0; l < num_levels; ++l) {
            table.grad[l] = grads[l].data_ptr<acc_t>();
            table.height[l] = feature_shapes[4 * l + 2];
            table.width[l] = feature_shapes[4 * l + 3];
            table.scale[l] = static_cast<acc_t>(scales[l]);
          }
          auto* kernel = channels_last ? &BackwardKernel<scalar_t, acc_t, true>
                                       : &BackwardKernel<scalar_t, acc_t, false>;
          kernel<<<BlocksFor(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              total, table, levels.defined() ? levels.data_ptr<int64_t>() : nullptr,
              rois.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), grad.stride(0), grad.stride(1),
              grad.stride(2), grad.stride(3), batch, channels, static_cast<int>(pooled_h),
              static_cast<int>(pooled_w), static_cast<int>(std::max<int64_t>(sampling_ratio, 0)),
              aligned);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
  }
  for (auto& g : grads) {
    g = g.to(grad.scalar_type());
  }
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  using Ops = RoiAlignOps<&ForwardCuda, &BackwardCuda>;
  m.impl("roi_align", &Ops::Forward);
  m.impl("_roi_align_backward", &Ops::Backward);
  m.impl("_multi_level_roi_align", &Ops::MultiLevelForward);
  m.impl("_multi_level_roi_align_backward", &Ops::MultiLevelBackward);
}

}  // namespace mrcnn::kernels
