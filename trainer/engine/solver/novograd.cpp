#include "trainer/engine/solver/novograd.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <stdexcept>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {
namespace {

constexpr const char* kMoment = "optimizer/novograd_m/";
constexpr const char* kSecond = "optimizer/novograd_v/";

}  // namespace

NovoGradOptions NovoGradOptions::FromConfig(const TrainConfig& config) {
  NovoGradOptions o;
  const FloatList& betas = config.GetFloatList("SOLVER.BETAS");
  if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1)) {
    throw common::ConfigError("config", "SOLVER.BETAS",
                              "must be two numbers in [0, 1), e.g. [0.95, 0.98]");
  }
  o.beta1 = betas[0];
  o.beta2 = betas[1];
  o.eps = config.GetFloat("SOLVER.NOVOGRAD.EPS");
  if (!(o.eps > 0))
    throw common::ConfigError("config", "SOLVER.NOVOGRAD.EPS", "must be > 0, e.g. 1e-8");
  o.grad_averaging = config.GetBool("SOLVER.NOVOGRAD.GRAD_AVERAGING");
  o.groups = ParamGroupOptions::FromConfig(config);
  return o;
}

NovoGrad::NovoGrad(const NamedParameters& named_parameters, NovoGradOptions options)
    : options_(options) {
  const auto kinds = ClassifyParameters(named_parameters);
  for (const auto& [name, p] : named_parameters) {
    if (!p.requires_grad())
      continue;
    const ParamKind kind = kinds.at(name);
    entries_.push_back(
        {name, p, options_.groups.WeightDecay(kind), options_.groups.LrFactor(kind), {}, {}});
  }
}

void NovoGrad::Step(const at::Tensor& found_inf) {
  c10::NoGradGuard no_grad;
  // As Sgd::Step: a 0-d bool on the device, new values committed with where.
  const at::Tensor apply = found_inf.defined() ? found_inf.reshape({}) == 0 : at::Tensor();
  for (auto& e : entries_) {
    const at::Tensor& grad = e.param.grad();
    if (!grad.defined())
      continue;
    // The norm in float64, kept on the device: the same arithmetic as reading it to the
    // host each step (v and sqrt(v) + eps in double, the division in the gradient's dtype),
    // without the wait.
    const at::Tensor norm_sq = grad.to(at::kDouble).pow(2).sum();
    at::Tensor v;
    if (!apply.defined()) {
      // Two products and a sum, each rounded, as the host did (add_ with alpha may fuse).
      v = e.v.defined() ? e.v * options_.beta2 + norm_sq * (1 - options_.beta2) : norm_sq;
    } else {
      // The first applied step takes the norm itself, whatever was skipped before it.
      if (!e.v.defined())
        e.v = at::full({}, -1.0, norm_sq.options());
      v = at::where(e.v < 0, norm_sq, e.v * options_.beta2 + norm_sq * (1 - options_.beta2));
    }
    at::Tensor u = grad / (v.sqrt() + options_.eps).to(grad.scalar_type());
    if (e.weight_decay != 0)
      u = u.add(e.param, e.weight_decay);
    if (options_.grad_averaging)
      u = u.mul(1 - options_.beta1);
    if (!apply.defined()) {
      e.v = v;
      if (!e.m.defined())
        e.m = u.clone();
      else
        e.m.mul_(options_.beta1).add_(u);
      e.param.add_(e.m, -lr() * e.lr_factor);
      continue;
    }
    // m starting at zero holds u after the first applied step, as the clone does.
    if (!e.m.defined())
      e.m = at::zeros_like(e.param);
    const at::Tensor m = e.m.mul(options_.beta1).add(u);
    at::where_out(e.param, apply, e.param.add(m, -lr() * e.lr_factor), e.param);
    at::where_out(e.m, apply, m, e.m);
    at::where_out(e.v, apply, v, e.v);
  }
}

void NovoGrad::ZeroGrad() {
  for (auto& e : entries_) {
    if (e.param.grad().defined())
      e.param.mutable_grad() = at::Tensor();
  }
}

std::vector<at::Tensor> NovoGrad::Parameters() const {
  std::vector<at::Tensor> params;
  for (const auto& e : entries_)
    params.push_back(e.param);
  return params;
}

std::map<std::string, at::Tensor> NovoGrad::State() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& e : entries_) {
    if (!e.v.defined())
      continue;
    at::Tensor v = e.v.to(at::kCPU);
    if (v.item<double>() < 0)  // every step so far was skipped: nothing to keep
      continue;
    state[kMoment + e.name] = e.m;
    state[kSecond + e.name] = v;
  }
  return state;
}

void NovoGrad::LoadState(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, Entry*> by_name;
  for (auto& e : entries_)
    by_name[e.name] = &e;
  for (const auto& [key, tensor] : state) {
    const bool moment = key.rfind(kMoment, 0) == 0, second = key.rfind(kSecond, 0) == 0;
    if (!moment && !second)
      continue;
    const std::string name = key.substr(std::string(moment ? kMoment : kSecond).size());
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw std::runtime_error("checkpoint: NovoGrad state '" + key +
                               "' names no trainable parameter");
    Entry& e = *it->second;
    if (moment) {
      if (tensor.sizes() != e.param.sizes())
        throw std::runtime_error("checkpoint: NovoGrad moment '" + key +
                                 "' has another shape than its parameter");
      e.m = tensor.to(e.param.device(), e.param.scalar_type()).clone();
    } else {
      if (tensor.numel() != 1)
        throw std::runtime_error("checkpoint: NovoGrad second moment '" + key +
                                 "' must hold one number, got " + std::to_string(tensor.numel()));
      e.v = tensor.to(e.param.device(), at::kDouble).reshape({}).clone();
    }
  }
}

}  // namespace mrcnn::engine
