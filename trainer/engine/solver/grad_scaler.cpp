#include "trainer/engine/solver/grad_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace mrcnn::engine {

GradScaler::GradScaler(bool enabled, double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval)
    : enabled_(enabled),
      scale_(enabled ? init_scale : 1.0),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

at::Tensor GradScaler::Scale(const at::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }

bool GradScaler::Unscale(const std::vector<at::Tensor>& params) {
  if (!enabled_) return true;
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  const double inv = 1.0 / scale_;
  for (const auto& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    finite.push_back(at::isfinite(g).all());
  }
  // One device sync for all parameters.
  return finite.empty() || at::stack(finite).all().item<bool>();
}

void GradScaler::Update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= growth_interval_) {
    scale_ *= growth_factor_;
    growth_tracker_ = 0;
  }
}

std::map<std::string, at::Tensor> GradScaler::State() const {
  return {{"scaler/scale", at::tensor({scale_}, at::kDouble)},
          {"scaler/growth_tracker", at::tensor({growth_tracker_}, at::kLong)}};
}

void GradScaler::LoadState(const std::map<std::string, at::Tensor>& state) {
  if (auto it = state.find("scaler/scale"); it != state.end()) scale_ = it->second.item<double>();
  if (auto it = state.find("scaler/growth_tracker"); it != state.end()) growth_tracker_ = it->second.item<int64_t>();
}

}  // namespace mrcnn::engine
