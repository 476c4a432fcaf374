// Argument checks and the per-level view shared by the CPU and CUDA ROIAlign
// kernels (single level = one-entry table).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <vector>

namespace mrcnn::kernels {

inline void CheckRois(const at::Tensor& rois, const char* op) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, op,
              ": rois must be K×5 (batch_index, x1, y1, x2, y2), got shape ", rois.sizes());
}

inline void CheckPooling(int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                         const char* op) {
  TORCH_CHECK(pooled_height > 0 && pooled_width > 0, op,
              ": pooled_height and pooled_width must be positive, got ", pooled_height, "×",
              pooled_width);
  TORCH_CHECK(sampling_ratio >= 0, op, ": sampling_ratio must be >= 0 (0 = adaptive), got ",
              sampling_ratio);
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

}  // namespace mrcnn::kernels
