#pragma once
// Dynamic loss scaling for fp16 training (torch.amp.GradScaler's algorithm): the loss is
// multiplied by the scale before backward; before the optimizer step gradients are divided
// by it and checked; a non-finite gradient skips the step and halves the scale; after
// `growth_interval` good steps in a row the scale doubles. Disabled (scale 1, never
// skips) for bf16 and fp32.
//
// Everything stays on the device, so a step never waits for it: the scale (float32 [1]),
// the growth tracker (int32 [1]) and the overflow flag Unscale returns, which the
// optimizer's Step(found_inf) reads on the device to skip the update. The scale and the
// tracker move to the device of the first loss scaled; until then they are on the CPU.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mrcnn::engine {

class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int64_t growth_interval = 2000);

  // loss * scale (the loss itself when disabled).
  at::Tensor Scale(const at::Tensor& loss);
  // Divides every defined gradient by the scale in place and returns the overflow flag:
  // float32 [1] on the gradients' device, 1 when any gradient is not finite, else 0.
  // Reads nothing back. Undefined when disabled (every step goes ahead).
  at::Tensor Unscale(const std::vector<at::Tensor>& params);
  // After a step attempt with Unscale's flag: halves the scale on overflow (and restarts
  // the growth count), else counts one good step and doubles the scale after
  // growth_interval of them. On the device; nothing when disabled.
  void Update(const at::Tensor& found_inf);

  bool enabled() const { return enabled_; }
  // The scale on its device (float32 [1]): what the trainer logs, read with the losses.
  const at::Tensor& scale_tensor() const { return scale_; }
  // Read to the host (a device sync): for tests and reports, not for the step.
  double scale() const;
  int64_t growth_tracker() const;

  // "scaler/scale" (float64 [1]), "scaler/growth_tracker" (int64 [1]), on the CPU.
  std::map<std::string, at::Tensor> State() const;
  void LoadState(const std::map<std::string, at::Tensor>& state);

 private:
  void MoveTo(const at::Device& device);

  bool enabled_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
};

}  // namespace mrcnn::engine
