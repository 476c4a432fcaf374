#pragma once
// What the training step and the checkpointer need from an optimizer. Implementations
// (sgd.h, ...) are built by name from SOLVER.OPTIMIZER (optimizer_registry.h). The
// learning rate is set per iteration by LrSchedulerHook; per-parameter factors (bias lr
// factor, ...) are the optimizer's own.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::engine {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }

  // One update at lr() from the current .grad() of every parameter; a parameter without
  // a gradient is skipped (as torch does).
  void Step() { Step(at::Tensor()); }
  // The same, unless `found_inf` (GradScaler::Unscale's flag: a one-element tensor on the
  // parameters' device) is nonzero: then parameters and optimizer state keep their values.
  // Decided on the device, so the host never waits for the flag. Undefined: Step().
  // A step with a flag gives the same values as Step() when the flag is 0.
  virtual void Step(const at::Tensor& found_inf) = 0;
  // Drops every parameter's gradient.
  virtual void ZeroGrad() = 0;
  // The parameters it updates (those with requires_grad), in model order: the order the
  // gradient all-reduce and clipping see them in.
  virtual std::vector<at::Tensor> Parameters() const = 0;

  // Named state for checkpoints ("optimizer/<kind>/<parameter name>"), and its restore:
  // throws naming the key on an unknown parameter or a shape mismatch; tensors are copied
  // to the parameter's device.
  virtual std::map<std::string, at::Tensor> State() const = 0;
  virtual void LoadState(const std::map<std::string, at::Tensor>& state) = 0;

 private:
  double lr_ = 0.0;
};

}  // namespace mrcnn::engine
