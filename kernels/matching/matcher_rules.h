// torchvision Matcher's rules, one copy for the CPU and CUDA matchers: which quality wins
// (torch.max's, NaN included) and what a prediction's best quality makes of it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "kernels/host_device_math.h"

namespace mrcnn::kernels {

// torch.max semantics: NaN is the largest value and the first NaN wins.
template <typename T>
C10_HOST_DEVICE inline bool BeatsForMax(T candidate, T best) {
  return !HdIsNan(best) && (candidate > best || HdIsNan(candidate));
}

// A prediction's match from its best quality over the gts and that gt's index: the index,
// -1 (BELOW_LOW_THRESHOLD) under `low`, -2 (BETWEEN_THRESHOLDS) under `high`; a
// low-quality match (the prediction is some gt's best, allow_low_quality_matches) keeps
// its index whatever the thresholds say.
template <typename T>
C10_HOST_DEVICE inline int64_t MatchFromBest(T best, int64_t gt_index, T low, T high,
                                             bool low_quality) {
  if (low_quality || !(best < low || best < high)) {
    return gt_index;
  }
  return best < low ? -1 : -2;
}

// mrcnn::match_proposals' arguments (both devices): a G×N quality matrix with G, N > 0 and
// ordered thresholds.
inline void CheckMatchArgs(const at::Tensor& quality, double high_threshold, double low_threshold,
                           const char* op) {
  TORCH_CHECK(quality.dim() == 2, op, ": match_quality must be G×N, got shape ", quality.sizes());
  TORCH_CHECK(quality.size(0) > 0, op,
              ": no ground-truth boxes (G = 0); handle images without boxes before matching");
  TORCH_CHECK(quality.size(1) > 0, op, ": no predictions (N = 0)");
  TORCH_CHECK(low_threshold <= high_threshold, op, ": low_threshold ", low_threshold,
              " exceeds high_threshold ", high_threshold);
}

}  // namespace mrcnn::kernels
