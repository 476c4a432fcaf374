#pragma once
// One training iteration: forward and backward of each micro-batch (autocast on CUDA, loss
// sum, loss scaling), then gradient averaging across processes, unscaling, clipping and the
// optimizer step. MaskRcnnTrainer::RunStep (mask_rcnn_trainer.cpp) and
// bench/model/train_step_bench.cpp both run it, so the benchmark times exactly the
// trainer's step instead of a copy that could drift.
// Header is Torch-light (ATen core types only).
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mrcnn::model {
class MetaArchitecture;
struct ImageBatch;
struct ImageTarget;
}  // namespace mrcnn::model

namespace mrcnn::engine {

namespace dist {
class DataParallel;
}
class GradScaler;
class Optimizer;
class PaddedFeatureStage;

struct TrainStepOptions {
  // Autocast dtype for the forward pass, on `amp_device_type`; nullopt: float32.
  std::optional<at::ScalarType> amp_dtype;
  c10::DeviceType amp_device_type = c10::DeviceType::CUDA;
  // SOLVER.CLIP_GRADIENTS: type "norm" (clip_grad_norm_ with norm_type) or "value", applied to
  // each parameter on its own (Detectron2's per-parameter clipper), or "full_model": the norm
  // of all gradients together clipped (clip_grad_norm_ over every parameter).
  bool clip = false;
  std::string clip_type = "value";
  double clip_value = 0.0;
  double clip_norm_type = 2.0;
  // Appended to the error thrown for a non-finite loss, to say what the caller can change.
  std::string nonfinite_advice;
  // SOLVER.CUDA_GRAPHS: the padded shapes (height, width) the image-wide stage (backbone,
  // neck, RPN head) is captured for, and the micro-batch size partial batches are padded
  // to (cuda_graphs/padded_feature_stage.h). Empty: the stage runs eagerly on the batch
  // as it comes.
  std::vector<std::array<int64_t, 2>> graph_shapes;
  int64_t graph_batch = 0;
  // With graph_shapes: pad as for the graphs but run the stage eagerly (no capture), on
  // any device. The CPU test of the padding uses it.
  bool graph_padding_only = false;
};

// The losses of one micro-batch, as computed (not divided by the accumulation), left on the
// step's device: reading them makes the host wait for the device, so the trainer reads a
// whole logging window at once (Read below).
struct MicroBatchLosses {
  std::vector<std::string> names;  // in std::map (name) order
  at::Tensor values;               // float32 [names.size() + 1]: the losses, then their sum

  // The values on the host: {name: value} and the sum. One device sync.
  std::map<std::string, double> Read(double* total) const;
};

class TrainStep {
 public:
  // The step keeps references: all of them must outlive it. `dp` may be null (one process,
  // no averaging). The parameters stepped are `optimizer`'s Parameters().
  TrainStep(model::MetaArchitecture& net, Optimizer& optimizer, GradScaler& scaler,
            dist::DataParallel* dp, const c10::Device& device, TrainStepOptions options);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // With graph_shapes: the padded (and, on CUDA, graphed) stage, for its run counts.
  const PaddedFeatureStage* feature_stage() const { return feature_stage_.get(); }

  // Forward and backward of one of the iteration's `accumulation` micro-batches: adds the
  // gradients of (sum of losses) / accumulation to the parameters' .grad(). `generators`
  // are the per-image sampling generators (see MetaArchitecture::set_sampling_generators;
  // empty: the global generator). Reads nothing back from the device: a non-finite loss
  // is found when the losses are read (CheckFinite). `iteration` is unused.
  // The `accumulation`-th call since the last Finish is the iteration's last micro-batch:
  // with DIST.OVERLAP_BACKWARD its backward starts the gradient all-reduce (one more call
  // before Finish throws std::logic_error).
  MicroBatchLosses ForwardBackward(const model::ImageBatch& batch,
                                   const std::vector<model::ImageTarget>& targets,
                                   std::vector<at::Generator> generators, int64_t accumulation,
                                   int64_t iteration);

  // Throws std::runtime_error ("loss became nan at iteration N: <advice>") when `total`
  // (a micro-batch's read sum of losses) is not finite and there is no loss scaling to
  // skip such steps; `iteration` (1-based) names the step in the message.
  void CheckFinite(double total, int64_t iteration) const;

  // With loss scaling, every overflowed step halves the scale and is skipped: a loss or
  // gradient that is never finite again would skip steps for the rest of the job. As
  // fairseq's min_loss_scale: throws std::runtime_error ("fp16 loss scale fell to X at
  // iteration N ...: <advice>") once the scale read after iteration `iteration` is below
  // kMinLossScale.
  static constexpr double kMinLossScale = 1e-4;
  void CheckLossScale(double scale, int64_t iteration) const;

  // Ends the iteration: averages gradients across processes, unscales (AMP), clips, steps
  // the optimizer at its lr() unless a gradient overflowed, updates the loss scale and
  // zeroes the gradients. Waits for nothing: with fp16 loss scaling, the overflow check,
  // the skip and the scale update happen on the device. Returns the overflow flag
  // (GradScaler::Unscale's: float32 [1] on the device, 1 where the update was skipped), or
  // an undefined tensor without loss scaling (every update is applied).
  at::Tensor Finish();

  // Called with a phase name as each part of the step ends ("backbone_fpn", "rpn",
  // "roi_heads", "loss_sum_item" (the sum, no longer read), "backward", "optimizer"), for
  // the benchmark's per-phase
  // timing; empty (the default) in training.
  using PhaseHook = std::function<void(const char* phase)>;
  void set_phase_hook(PhaseHook hook) { phase_hook_ = std::move(hook); }

  // Called in Finish with the parameters once their gradients are final (averaged over
  // the ranks, unscaled, clipped) and before the update, with Finish's overflow flag (the
  // update is skipped where it is nonzero); for ParameterHistogramsHook. Empty by default.
  using GradientProbe =
      std::function<void(const std::vector<at::Tensor>& params, const at::Tensor& found_inf)>;
  void set_gradient_probe(GradientProbe probe) { gradient_probe_ = std::move(probe); }

 private:
  void Phase(const char* name) const {
    if (phase_hook_)
      phase_hook_(name);
  }

  model::MetaArchitecture& net_;
  Optimizer& optimizer_;
  GradScaler& scaler_;
  dist::DataParallel* dp_;
  c10::Device device_;
  TrainStepOptions options_;
  std::vector<at::Tensor> trainable_;
  std::unique_ptr<PaddedFeatureStage> feature_stage_;  // null: eager, unpadded
  int64_t micro_batches_ = 0;                          // since the last Finish
  PhaseHook phase_hook_;
  GradientProbe gradient_probe_;
};

}  // namespace mrcnn::engine
