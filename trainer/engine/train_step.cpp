#include "trainer/engine/train_step.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "trainer/engine/cuda_graphs/cuda_graphed_feature_stage.h"
#include "trainer/engine/cuda_graphs/padded_feature_stage.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/optimizer.h"
#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::engine {
namespace {

// torch::nn::utils::clip_grad_norm_ with the same operations in the same order (so the
// gradients come out bit for bit the same), without its return value: it reads the total
// norm to the host (.item()), which makes every step with clipping wait for the device.
void ClipGradNorm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined())
      grads.push_back(p.grad().data());
  if (grads.empty())
    return;
  at::Tensor total;
  if (norm_type == std::numeric_limits<double>::infinity()) {
    std::vector<at::Tensor> norms;
    for (const auto& g : grads)
      norms.push_back(g.abs().max());
    total = norms.size() == 1 ? norms[0] : torch::max(torch::stack(norms));
  } else if (norm_type == 0) {
    total = torch::full({}, static_cast<double>(grads.size()));
  } else {
    std::vector<at::Tensor> norms;
    for (const auto& g : grads)
      norms.push_back(g.norm(norm_type));
    total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(norm_type);
  }
  const at::Tensor coef = torch::clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (auto& g : grads)
    g.mul_(coef);
}

}  // namespace

TrainStep::TrainStep(model::MetaArchitecture& net, Optimizer& optimizer, GradScaler& scaler,
                     dist::DataParallel* dp, const c10::Device& device, TrainStepOptions options)
    : net_(net),
      optimizer_(optimizer),
      scaler_(scaler),
      dp_(dp),
      device_(device),
      options_(std::move(options)) {
  trainable_ = optimizer_.Parameters();
  if (options_.graph_shapes.empty())
    return;
  if (options_.graph_padding_only) {
    feature_stage_ =
        std::make_unique<PaddedFeatureStage>(net_, options_.graph_shapes, options_.graph_batch);
  } else if (!device_.is_cuda()) {
    throw std::invalid_argument("SOLVER.CUDA_GRAPHS needs a CUDA device, the step runs on " +
                                device_.str());
  } else {
    feature_stage_ = MakeCudaGraphedFeatureStage(net_, options_.graph_shapes, options_.graph_batch,
                                                 options_.amp_dtype);
  }
}

TrainStep::~TrainStep() = default;

std::map<std::string, double> MicroBatchLosses::Read(double* total) const {
  const at::Tensor host = values.to(at::kCPU);
  const float* v = host.data_ptr<float>();
  std::map<std::string, double> out;
  for (size_t i = 0; i < names.size(); ++i)
    out[names[i]] = v[i];
  if (total != nullptr)
    *total = v[names.size()];
  return out;
}

MicroBatchLosses TrainStep::ForwardBackward(const model::ImageBatch& batch,
                                            const std::vector<model::ImageTarget>& targets,
                                            std::vector<at::Generator> generators,
                                            int64_t accumulation, int64_t /*iteration*/) {
  if (++micro_batches_ > accumulation) {
    throw std::logic_error("TrainStep: " + std::to_string(micro_batches_) +
                           " micro-batches of an iteration with accumulation " +
                           std::to_string(accumulation) + " (Finish not called)");
  }
  net_.set_sampling_generators(std::move(generators));
  const bool amp = options_.amp_dtype.has_value();
  if (amp) {
    at::autocast::set_autocast_dtype(options_.amp_device_type, *options_.amp_dtype);
    at::autocast::set_autocast_enabled(options_.amp_device_type, true);
  }
  // The model reports the end of its proposal generator ("rpn"), which is this step's "rpn"
  // phase too; whatever hook the model had sees every phase as before.
  const std::function<void(const char*)> model_hook = net_.phase_hook();
  net_.set_phase_hook([this, &model_hook](const char* name) {
    if (name != nullptr && std::string_view(name) == "rpn")
      Phase("rpn");
    if (model_hook)
      model_hook(name);
  });
  std::map<std::string, at::Tensor> losses;
  try {
    if (feature_stage_) {
      // Backbone, neck and the dense head on the padded batch (a graph replay on CUDA); the
      // proposal generator sees the padded tensor, whose size sets the anchors.
      model::ImageBatch padded{at::Tensor(), batch.image_sizes, batch.original_sizes};
      const model::FeatureStageOutput stage = feature_stage_->Run(batch.tensors, &padded.tensors);
      Phase("backbone_fpn");
      losses = net_.Heads(padded, stage, &targets).losses;
    } else {
      const model::FeatureStageOutput stage = net_.FeatureStage(batch.tensors);
      Phase("backbone_fpn");
      losses = net_.Heads(batch, stage, &targets).losses;
    }
  } catch (...) {
    net_.set_phase_hook(model_hook);
    throw;
  }
  net_.set_phase_hook(model_hook);
  if (amp) {
    at::autocast::set_autocast_enabled(options_.amp_device_type, false);
    at::autocast::clear_cache();
  }
  Phase("roi_heads");
  MicroBatchLosses out;
  // Summed in float32 in the map's (name) order: the resume tests compare loss sequences
  // bit for bit, so this order is part of the step's behaviour. Kept on the device, with
  // the values in one tensor so that a window of steps is read in one copy.
  at::Tensor total = torch::zeros({}, batch.tensors.options().dtype(torch::kFloat));
  std::vector<at::Tensor> parts;
  for (auto& [k, v] : losses) {
    total = total + v.to(torch::kFloat);
    out.names.push_back(k);
    parts.push_back(v.detach().to(torch::kFloat).reshape({1}));
  }
  parts.push_back(total.detach().reshape({1}));
  out.values = torch::cat(parts);
  Phase("loss_sum_item");
  if (dp_ != nullptr && micro_batches_ == accumulation)
    dp_->ExpectFinalBackward(trainable_);
  scaler_.Scale(total / static_cast<double>(accumulation)).backward();
  Phase("backward");
  return out;
}

void TrainStep::CheckFinite(double total, int64_t iteration) const {
  if (!std::isfinite(total) && !scaler_.enabled()) {
    throw std::runtime_error("loss became " + std::to_string(total) + " at iteration " +
                             std::to_string(iteration) + ": " + options_.nonfinite_advice);
  }
}

void TrainStep::CheckLossScale(double scale, int64_t iteration) const {
  if (scale >= kMinLossScale)
    return;
  std::ostringstream message;
  message << "fp16 loss scale fell to " << scale << " at iteration " << iteration << " (below "
          << kMinLossScale
          << "): steps keep overflowing, so the loss or the gradients are not finite: "
          << options_.nonfinite_advice << ", or train in bfloat16 (SOLVER.AMP.DTYPE)";
  throw std::runtime_error(message.str());
}

at::Tensor TrainStep::Finish() {
  net_.set_sampling_generators({});
  micro_batches_ = 0;
  // Averaged (or, with DIST.OVERLAP_BACKWARD, finished and waited for) before unscaling:
  // every rank then sees the same gradients, so they agree on overflow (AMP), clipping and
  // the update.
  if (dp_ != nullptr)
    dp_->AverageGradients(trainable_);
  // Undefined without loss scaling. With it, clipping and the probe also see an
  // overflowed step's gradients; the optimizer then leaves everything as it was.
  const at::Tensor found_inf = scaler_.Unscale(trainable_);
  if (options_.clip && options_.clip_type == "full_model") {
    ClipGradNorm(trainable_, options_.clip_value, options_.clip_norm_type);
  } else if (options_.clip) {
    // Each parameter's gradient on its own, as Detectron2's per-parameter clipper does.
    for (const at::Tensor& parameter : trainable_) {
      if (options_.clip_type == "norm")
        ClipGradNorm({parameter}, options_.clip_value, options_.clip_norm_type);
      else
        torch::nn::utils::clip_grad_value_(parameter, options_.clip_value);
    }
  }
  if (gradient_probe_)
    gradient_probe_(trainable_, found_inf);
  optimizer_.Step(found_inf);
  scaler_.Update(found_inf);
  optimizer_.ZeroGrad();
  Phase("optimizer");
  return found_inf;
}

}  // namespace mrcnn::engine
