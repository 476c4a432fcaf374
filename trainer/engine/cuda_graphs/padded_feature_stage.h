#pragma once
// The training step's image-wide stage (backbone, neck, RPN head: MetaArchitecture::
// FeatureStage) on batches padded to a fixed set of shapes, the form a CUDA graph needs:
// a graph replays fixed sizes at fixed addresses. A micro-batch whose padded image fits
// one of `shapes` (height, width) is padded with zeros to the smallest such shape, and to
// `full_batch` images when it has fewer (a partial last batch); the stage runs on that
// tensor and its outputs are cut back to the real images, so the padding images get no
// gradient and no loss. A batch that fits no shape runs as it is (eager).
//
// This class runs the padded stage eagerly; CudaGraphedFeatureStage (CUDA builds)
// replays a captured graph instead. Both give the losses of eager training on the same
// padded batch, which is what test/trainer/padded_feature_stage_test.cpp checks on CPU.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace mrcnn::model {
class MetaArchitecture;
struct FeatureStageOutput;
}  // namespace mrcnn::model

namespace mrcnn::engine {

class PaddedFeatureStage {
 public:
  // `shapes`: (height, width) pairs, each a multiple of the model's size divisibility
  // (checked where the config is read). `full_batch` >= 1.
  PaddedFeatureStage(model::MetaArchitecture& net, std::vector<std::array<int64_t, 2>> shapes,
                     int64_t full_batch);
  virtual ~PaddedFeatureStage() = default;
  PaddedFeatureStage(const PaddedFeatureStage&) = delete;
  PaddedFeatureStage& operator=(const PaddedFeatureStage&) = delete;

  // The stage's outputs for `batch` (N×3×H×W). `*rpn_input` becomes the tensor the RPN
  // must see as the batch (its shape sets the anchor strides): `batch` cut from the
  // padded one, or `batch` itself when it fits no shape.
  model::FeatureStageOutput Run(const at::Tensor& batch, at::Tensor* rpn_input);

  // The index in `shapes` of the smallest (by area, then order) shape at least `height` ×
  // `width`, if any.
  std::optional<size_t> PickShape(int64_t height, int64_t width) const;

  // Steps that ran padded and eager (no shape fitted), for the job's summary.
  int64_t padded_runs() const { return padded_runs_; }
  int64_t eager_runs() const { return eager_runs_; }

 protected:
  // The stage on a full padded batch (full_batch × 3 × shape). Eager here.
  virtual model::FeatureStageOutput RunPadded(size_t shape_index, const at::Tensor& padded);

  model::MetaArchitecture& net_;
  std::vector<std::array<int64_t, 2>> shapes_;
  int64_t full_batch_;

 private:
  int64_t padded_runs_ = 0, eager_runs_ = 0;
};

}  // namespace mrcnn::engine
