#pragma once
// Dynamic loss scaling for fp16 training (torch.amp.GradScaler's algorithm): the loss is
// multiplied by `scale` before backward; before the optimizer step gradients are divided
// by it and checked; a non-finite gradient skips the step and halves the scale; after
// `growth_interval` good steps in a row the scale doubles. Disabled (scale 1, never
// skips) for bf16 and fp32.
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

  at::Tensor Scale(const at::Tensor& loss) const;
  // Divides every defined gradient by the scale in place; returns true when all are
  // finite (the step may go ahead).
  bool Unscale(const std::vector<at::Tensor>& params);
  // Updates the scale after a step attempt; `found_inf` = !Unscale(...).
  void Update(bool found_inf);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }

  // "scaler/scale", "scaler/growth_tracker"
  std::map<std::string, at::Tensor> State() const;
  void LoadState(const std::map<std::string, at::Tensor>& state);

 private:
  bool enabled_;
  double scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
};

}  // namespace mrcnn::engine
