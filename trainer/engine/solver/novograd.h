#pragma once
// NovoGrad (Ginsburg et al., "Stochastic Gradient Methods with Layer-wise Adaptive Moments
// for Training of Deep Networks", 2019), the large-batch optimizer of the fast Mask R-CNN
// runs, in NVIDIA's form (OpenSeq2Seq / apex FusedNovoGrad, norm 2, moments in the update):
// per parameter tensor (a "layer") with gradient g,
//   v = ||g||^2 on the first step, then v = beta2 * v + (1 - beta2) * ||g||^2   (a scalar)
//   u = g / (sqrt(v) + eps) + weight_decay * w      (times (1 - beta1) with grad averaging)
//   m = beta1 * m + u                               (m starts at 0)
//   w = w - lr * lr_factor * m
// Weight decay and lr factors per parameter group as Sgd (norm layers, biases). Selected by
// SOLVER.OPTIMIZER NovoGrad; SOLVER.BETAS, SOLVER.NOVOGRAD.EPS, SOLVER.NOVOGRAD.GRAD_AVERAGING.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/engine/solver/optimizer.h"
#include "trainer/engine/solver/sgd.h"

namespace mrcnn::engine {

class TrainConfig;

struct NovoGradOptions {
  double beta1 = 0.95, beta2 = 0.98;
  double eps = 1e-8;
  bool grad_averaging = false;
  ParamGroupOptions groups;
  // Throws common::ConfigError naming the key for betas outside [0, 1) or eps <= 0.
  static NovoGradOptions FromConfig(const TrainConfig& config);
};

class NovoGrad : public Optimizer {
 public:
  NovoGrad(const NamedParameters& named_parameters, NovoGradOptions options);
  using Optimizer::Step;
  void Step(const at::Tensor& found_inf) override;
  void ZeroGrad() override;
  std::vector<at::Tensor> Parameters() const override;
  // "optimizer/novograd_m/<name>" and "optimizer/novograd_v/<name>" (a 0-d float64).
  std::map<std::string, at::Tensor> State() const override;
  void LoadState(const std::map<std::string, at::Tensor>& state) override;

 private:
  struct Entry {
    std::string name;
    at::Tensor param;
    double weight_decay;
    double lr_factor;
    at::Tensor m;  // undefined until the first step
    // The layer's second moment: a 0-d float64 tensor on the parameter's device, so a step
    // never waits for the device to hand a norm to the host. Undefined until the first step;
    // -1 (norms are >= 0) after steps that were all skipped (Step(found_inf)).
    at::Tensor v;
  };
  NovoGradOptions options_;
  std::vector<Entry> entries_;
};

}  // namespace mrcnn::engine
