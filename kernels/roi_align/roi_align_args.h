// Argument checks and the per-roi arithmetic shared by the CPU and CUDA ROIAlign
// kernels (single level = one-entry table), so both accept the same arguments and
// treat degenerate rois the same way.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/std_min_max.h"

namespace mrcnn::kernels {

inline void CheckRois(const at::Tensor& rois, const char* op) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, op,
              ": rois must be K×5 (batch_index, x1, y1, x2, y2), got shape ", rois.sizes());
}

// As torchvision: pooled sizes may be 0 (an empty output); sampling_ratio <= 0 means
// adaptive sampling (ceil(roi_size / pooled_size) points per bin and axis), > 0 that
// many points. The kernels index with int, so values beyond int32 are rejected.
inline void CheckPooling(int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                         const char* op) {
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(pooled_height >= 0 && pooled_width >= 0, op,
              ": pooled_height and pooled_width must be >= 0, got ", pooled_height, "×",
              pooled_width);
  TORCH_CHECK(pooled_height <= kIntMax && pooled_width <= kIntMax, op,
              ": pooled_height and pooled_width must fit in int32, got ", pooled_height, "×",
              pooled_width);
  TORCH_CHECK(sampling_ratio <= kIntMax, op,
              ": sampling_ratio must fit in int32 (<= 0: adaptive, > 0: points per bin and axis), "
              "got ",
              sampling_ratio);
}

// The batch index of a roi (stored as a float): truncated toward zero as torchvision
// does, or -1 when it is NaN or cannot be an index (the kernels then reject the roi on
// CPU and pool zeros on CUDA, where checking would need a sync).
template <typename acc_t>
C10_HOST_DEVICE inline int64_t RoiBatchIndex(acc_t value) {
  return value > acc_t(-1) && value < acc_t(4.6e18) ? static_cast<int64_t>(value) : -1;
}

// Sampling points per bin along one axis for adaptive sampling, from
// ceiled = ceil(roi_size / pooled_size). torchvision converts that value to int; when
// it is not in [1, INT32_MAX] (roi size <= 0 when aligned, NaN or infinite coordinates,
// sizes beyond int range) the roi samples nothing and pools zeros, which is what
// torchvision's CPU kernel does (the x86 conversion gives INT_MIN: empty loops).
template <typename acc_t>
C10_HOST_DEVICE inline int AdaptiveGridSize(acc_t ceiled) {
  return ceiled >= acc_t(1) && ceiled < acc_t(2147483648.0) ? static_cast<int>(ceiled) : 0;
}

// Where one roi samples its feature map: the first corner, the bin size, the grid of
// sampling points per bin (0 for a roi that samples nothing) and the divisor of a
// bin's sum. grid_t is int64_t on CPU (its grids are checked against int32 later) and
// int on CUDA.
template <typename acc_t, typename grid_t = int64_t>
struct RoiGeometry {
  int64_t batch;
  acc_t start_h, start_w, bin_h, bin_w;
  grid_t grid_h, grid_w;  // >= 0
  acc_t count;
};

// torchvision's per-roi arithmetic, one function for the CPU and CUDA kernels so that
// they agree on every input, non-finite ones included: StdMax keeps a NaN roi size NaN
// (CUDA's max would turn it into 1 and sample a 1-pixel roi), and AdaptiveGridSize
// turns NaN into an empty grid.
template <typename grid_t, typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline RoiGeometry<acc_t, grid_t> ComputeRoiGeometry(const scalar_t* roi,
                                                                     acc_t scale, int64_t pooled_h,
                                                                     int64_t pooled_w,
                                                                     int64_t sampling_ratio,
                                                                     bool aligned) {
  RoiGeometry<acc_t, grid_t> g;
  g.batch = RoiBatchIndex(static_cast<acc_t>(roi[0]));
  const acc_t offset = aligned ? acc_t(0.5) : acc_t(0);
  g.start_w = static_cast<acc_t>(roi[1]) * scale - offset;
  g.start_h = static_cast<acc_t>(roi[2]) * scale - offset;
  const acc_t end_w = static_cast<acc_t>(roi[3]) * scale - offset;
  const acc_t end_h = static_cast<acc_t>(roi[4]) * scale - offset;
  acc_t roi_w = end_w - g.start_w;
  acc_t roi_h = end_h - g.start_h;
  if (!aligned) {
    roi_w = StdMax(roi_w, acc_t(1));
    roi_h = StdMax(roi_h, acc_t(1));
  }
  const acc_t bins_h = static_cast<acc_t>(pooled_h), bins_w = static_cast<acc_t>(pooled_w);
  g.bin_h = roi_h / bins_h;
  g.bin_w = roi_w / bins_w;
#ifdef __CUDA_ARCH__
  const acc_t ceiled_h = ceil(roi_h / bins_h), ceiled_w = ceil(roi_w / bins_w);
#else
  const acc_t ceiled_h = std::ceil(roi_h / bins_h), ceiled_w = std::ceil(roi_w / bins_w);
#endif
  g.grid_h = sampling_ratio > 0 ? static_cast<grid_t>(sampling_ratio) : AdaptiveGridSize(ceiled_h);
  g.grid_w = sampling_ratio > 0 ? static_cast<grid_t>(sampling_ratio) : AdaptiveGridSize(ceiled_w);
  g.count = StdMax(static_cast<acc_t>(static_cast<int64_t>(g.grid_h) * g.grid_w), acc_t(1));
  return g;
}

// torchvision's CPU kernel stores one int-indexed record per sampling point of a roi,
// so it cannot pool a roi with more than INT32_MAX of them (it fails or overflows).
// Such a roi (a huge adaptive grid) is rejected here on CPU and pools zeros on CUDA,
// instead of running for hours.
C10_HOST_DEVICE inline bool TooManySamples(int64_t pooled_h, int64_t pooled_w, int64_t grid_h,
                                           int64_t grid_w) {
  return static_cast<double>(pooled_h) * static_cast<double>(pooled_w) *
             static_cast<double>(grid_h) * static_cast<double>(grid_w) >
         2147483647.0;
}

// Features of every level must agree on batch size, channels, dtype and device.
inline void CheckLevelFeatures(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                               const char* op) {
  TORCH_CHECK(!features.empty(), op, ": features must hold at least one level");
  TORCH_CHECK(features.size() <= 8, op, ": at most 8 feature levels are supported, got ",
              features.size());
  const at::Tensor& first = features.front();
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& f = features[l];
    TORCH_CHECK(f.dim() == 4, op, ": features[", l, "] must be B×C×H×W, got shape ", f.sizes());
    TORCH_CHECK(f.size(0) == first.size(0) && f.size(1) == first.size(1), op, ": features[", l,
                "] has batch/channels ", f.size(0), "/", f.size(1), " but features[0] has ",
                first.size(0), "/", first.size(1));
    TORCH_CHECK(f.scalar_type() == rois.scalar_type(), op, ": features[", l, "] dtype ",
                f.scalar_type(), " differs from rois dtype ", rois.scalar_type(),
                " (cast rois to the feature dtype)");
    TORCH_CHECK(f.device() == rois.device(), op, ": features[", l, "] is on ", f.device(),
                " but rois are on ", rois.device());
  }
}

// Whether every level is a channels-last map (B×C×H×W stored as B×H×W×C) and not also plain
// contiguous (C, H or W of 1): the levels the CUDA kernels read in place, channel fastest,
// and whose gradients the autograd function asks for in the same layout.
inline bool FeaturesChannelsLast(c10::ArrayRef<at::Tensor> features) {
  if (features.empty()) {
    return false;
  }
  for (const at::Tensor& f : features) {
    if (f.dim() != 4 || f.size(1) <= 1 || !f.is_contiguous(at::MemoryFormat::ChannelsLast) ||
        f.is_contiguous()) {
      return false;
    }
  }
  return true;
}

}  // namespace mrcnn::kernels
