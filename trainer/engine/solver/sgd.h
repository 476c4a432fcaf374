#pragma once
// SGD with momentum and weight decay (torch.optim.SGD's update, dampening 0), with
// parameters grouped by name as Detectron2's get_default_optimizer_params groups them:
// norm-layer weights get SOLVER.WEIGHT_DECAY_NORM; every bias (a norm layer's too) an lr
// multiplied by SOLVER.BIAS_LR_FACTOR and SOLVER.WEIGHT_DECAY_BIAS when that is set (not
// null), else the weight decay of its kind (WEIGHT_DECAY_NORM for a norm layer's,
// SOLVER.WEIGHT_DECAY for the others); everything else SOLVER.WEIGHT_DECAY. Momentum buffers
// are keyed by parameter name so checkpoints stay readable and portable.
#include <ATen/core/Tensor.h>

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainer/engine/solver/optimizer.h"

namespace mrcnn::engine {

class TrainConfig;

enum class ParamKind { kWeight, kBias, kNorm, kNormBias };

// Per-kind settings every optimizer applies (SOLVER.WEIGHT_DECAY, _NORM, _BIAS and
// SOLVER.BIAS_LR_FACTOR), as Detectron2's parameter groups.
struct ParamGroupOptions {
  double weight_decay = 1e-4;
  double weight_decay_norm = 0.0;
  double weight_decay_bias = std::numeric_limits<double>::quiet_NaN();  // NaN: not set (null)
  double bias_lr_factor = 1.0;
  static ParamGroupOptions FromConfig(const TrainConfig& config);
  double WeightDecay(ParamKind kind) const;
  double LrFactor(ParamKind kind) const;
};

struct SgdOptions {
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double weight_decay_norm = 0.0;
  double weight_decay_bias = std::numeric_limits<double>::quiet_NaN();
  double bias_lr_factor = 1.0;
  static SgdOptions FromConfig(const TrainConfig& config);
  ParamGroupOptions groups() const {
    return {weight_decay, weight_decay_norm, weight_decay_bias, bias_lr_factor};
  }
};

// Norm parameters are 1-D weights (conv and linear weights have >= 2 dims: only GroupNorm and
// BatchNorm layers have trainable 1-D weights here) and the biases of modules that have such
// a weight (kNormBias).
std::map<std::string, ParamKind> ClassifyParameters(
    const std::vector<std::pair<std::string, at::Tensor>>& named);

class Sgd : public Optimizer {
 public:
  // Only parameters with requires_grad are optimised.
  Sgd(const std::vector<std::pair<std::string, at::Tensor>>& named_parameters, SgdOptions options);

  using Optimizer::Step;
  void Step(const at::Tensor& found_inf) override;
  // set_lr(lr) then Step().
  void Step(double lr);
  void ZeroGrad() override;
  std::vector<at::Tensor> Parameters() const override;

  // "optimizer/momentum/<param name>" for every parameter with a momentum buffer.
  std::map<std::string, at::Tensor> State() const override;
  // Restores buffers written by State(); throws naming the key on an unknown parameter or
  // a shape mismatch. Buffers are copied to the parameter's device.
  void LoadState(const std::map<std::string, at::Tensor>& state) override;

  struct Entry {
    std::string name;
    at::Tensor param;
    ParamKind kind;
    double weight_decay;
    double lr_factor;
    at::Tensor momentum_buffer;  // undefined until the first step (zero if it was skipped)
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  SgdOptions options_;
  std::vector<Entry> entries_;
};

}  // namespace mrcnn::engine
