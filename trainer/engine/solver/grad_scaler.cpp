#include "trainer/engine/solver/grad_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace mrcnn::engine {

GradScaler::GradScaler(bool enabled, double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval)
    : enabled_(enabled),
      scale_(at::full({1}, enabled ? init_scale : 1.0, at::kFloat)),
      growth_tracker_(at::zeros({1}, at::kInt)),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

void GradScaler::MoveTo(const at::Device& device) {
  if (scale_.device() == device)
    return;
  scale_ = scale_.to(device);
  growth_tracker_ = growth_tracker_.to(device);
}

at::Tensor GradScaler::Scale(const at::Tensor& loss) {
  if (!enabled_)
    return loss;
  MoveTo(loss.device());
  return loss * scale_.to(loss.scalar_type()).reshape({});
}

at::Tensor GradScaler::Unscale(const std::vector<at::Tensor>& params) {
  if (!enabled_)
    return {};
  c10::NoGradGuard no_grad;
  // The fused check-and-multiply takes one dtype per call, as torch's GradScaler groups.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& p : params) {
    if (p.grad().defined())
      by_dtype[p.grad().scalar_type()].push_back(p.grad());
  }
  if (!by_dtype.empty())
    MoveTo(by_dtype.begin()->second.front().device());
  at::Tensor found_inf = at::zeros({1}, scale_.options());
  // torch's: the reciprocal in float64, then float32 (exact for the powers of two the scale
  // takes from a power-of-two start).
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  for (auto& [dtype, grads] : by_dtype)
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  return found_inf;
}

void GradScaler::Update(const at::Tensor& found_inf) {
  if (!enabled_)
    return;
  MoveTo(found_inf.device());
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, growth_factor_, backoff_factor_,
                         growth_interval_);
}

double GradScaler::scale() const {
  return scale_.item<double>();
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.item<int64_t>();
}

std::map<std::string, at::Tensor> GradScaler::State() const {
  return {{"scaler/scale", scale_.to(at::kCPU, at::kDouble)},
          {"scaler/growth_tracker", growth_tracker_.to(at::kCPU, at::kLong)}};
}

void GradScaler::LoadState(const std::map<std::string, at::Tensor>& state) {
  const at::Device device = scale_.device();
  if (auto it = state.find("scaler/scale"); it != state.end())
    scale_ = it->second.to(device, at::kFloat).reshape({1}).clone();
  if (auto it = state.find("scaler/growth_tracker"); it != state.end())
    growth_tracker_ = it->second.to(device, at::kInt).reshape({1}).clone();
}

}  // namespace mrcnn::engine
