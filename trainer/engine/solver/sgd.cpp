#include "trainer/engine/solver/sgd.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "trainer/engine/config/config.h"

namespace mrcnn::engine {
namespace {

constexpr const char* kMomentumPrefix = "optimizer/momentum/";

std::string ModuleOf(const std::string& name) {
  auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

std::string LeafOf(const std::string& name) {
  auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

ParamGroupOptions ParamGroupOptions::FromConfig(const TrainConfig& config) {
  return {config.GetFloat("SOLVER.WEIGHT_DECAY"), config.GetFloat("SOLVER.WEIGHT_DECAY_NORM"),
          config.GetFloat("SOLVER.WEIGHT_DECAY_BIAS"), config.GetFloat("SOLVER.BIAS_LR_FACTOR")};
}

double ParamGroupOptions::WeightDecay(ParamKind kind) const {
  const bool bias_set = !std::isnan(weight_decay_bias);
  switch (kind) {
    case ParamKind::kNorm:
      return weight_decay_norm;
    case ParamKind::kNormBias:
      return bias_set ? weight_decay_bias : weight_decay_norm;
    case ParamKind::kBias:
      return bias_set ? weight_decay_bias : weight_decay;
    case ParamKind::kWeight:
      break;
  }
  return weight_decay;
}

double ParamGroupOptions::LrFactor(ParamKind kind) const {
  return kind == ParamKind::kBias || kind == ParamKind::kNormBias ? bias_lr_factor : 1.0;
}

SgdOptions SgdOptions::FromConfig(const TrainConfig& config) {
  SgdOptions o;
  o.momentum = config.GetFloat("SOLVER.MOMENTUM");
  o.nesterov = config.GetBool("SOLVER.NESTEROV");
  const ParamGroupOptions g = ParamGroupOptions::FromConfig(config);
  o.weight_decay = g.weight_decay;
  o.weight_decay_norm = g.weight_decay_norm;
  o.weight_decay_bias = g.weight_decay_bias;
  o.bias_lr_factor = g.bias_lr_factor;
  return o;
}

std::map<std::string, ParamKind> ClassifyParameters(
    const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::set<std::string> norm_modules;
  for (const auto& [name, p] : named) {
    if (LeafOf(name) == "weight" && p.dim() == 1)
      norm_modules.insert(ModuleOf(name));
  }
  std::map<std::string, ParamKind> kinds;
  for (const auto& [name, p] : named) {
    if (norm_modules.count(ModuleOf(name))) {
      kinds[name] = LeafOf(name) == "bias" ? ParamKind::kNormBias : ParamKind::kNorm;
    } else if (LeafOf(name) == "bias") {
      kinds[name] = ParamKind::kBias;
    } else {
      kinds[name] = ParamKind::kWeight;
    }
  }
  return kinds;
}

Sgd::Sgd(const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
         SgdOptions options)
    : options_(options) {
  auto kinds = ClassifyParameters(named_parameters);
  const ParamGroupOptions groups = options_.groups();
  for (const auto& [name, p] : named_parameters) {
    if (!p.requires_grad())
      continue;
    const ParamKind kind = kinds.at(name);
    entries_.push_back({name, p, kind, groups.WeightDecay(kind), groups.LrFactor(kind), {}});
  }
}

void Sgd::Step(double lr) {
  set_lr(lr);
  Step();
}

std::vector<at::Tensor> Sgd::Parameters() const {
  std::vector<at::Tensor> params;
  params.reserve(entries_.size());
  for (const auto& e : entries_)
    params.push_back(e.param);
  return params;
}

void Sgd::Step(const at::Tensor& found_inf) {
  const double lr = this->lr();
  c10::NoGradGuard no_grad;
  // Whether the update goes ahead, as a 0-d bool on the device; undefined: always. New
  // values are then committed with where(apply, new, old), written in place.
  const at::Tensor apply = found_inf.defined() ? found_inf.reshape({}) == 0 : at::Tensor();
  for (auto& e : entries_) {
    const at::Tensor& grad = e.param.grad();
    if (!grad.defined())
      continue;
    at::Tensor d_p = e.weight_decay != 0 ? grad.add(e.param, e.weight_decay) : grad;
    if (options_.momentum != 0) {
      if (!apply.defined()) {
        if (!e.momentum_buffer.defined())
          e.momentum_buffer = d_p.clone().detach();
        else
          e.momentum_buffer.mul_(options_.momentum).add_(d_p);
      } else {
        // A buffer starting at zero holds d_p after the first applied step, as the clone
        // does (dampening is 0), however many skipped steps came before it.
        if (!e.momentum_buffer.defined())
          e.momentum_buffer = at::zeros_like(e.param);
        at::where_out(e.momentum_buffer, apply, e.momentum_buffer.mul(options_.momentum).add(d_p),
                      e.momentum_buffer);
      }
      d_p = options_.nesterov ? d_p.add(e.momentum_buffer, options_.momentum) : e.momentum_buffer;
    }
    if (!apply.defined())
      e.param.add_(d_p, -lr * e.lr_factor);
    else
      at::where_out(e.param, apply, e.param.add(d_p, -lr * e.lr_factor), e.param);
  }
}

void Sgd::ZeroGrad() {
  for (auto& e : entries_) {
    if (e.param.grad().defined())
      e.param.mutable_grad() = at::Tensor();
  }
}

std::map<std::string, at::Tensor> Sgd::State() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& e : entries_) {
    if (e.momentum_buffer.defined())
      state[kMomentumPrefix + e.name] = e.momentum_buffer;
  }
  return state;
}

void Sgd::LoadState(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, Entry*> by_name;
  for (auto& e : entries_)
    by_name[e.name] = &e;
  const std::string prefix = kMomentumPrefix;
  for (const auto& [key, tensor] : state) {
    if (key.rfind(prefix, 0) != 0)
      continue;
    const std::string name = key.substr(prefix.size());
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw std::runtime_error("checkpoint: momentum buffer '" + key +
                               "' names no trainable parameter");
    }
    Entry& e = *it->second;
    if (tensor.sizes() != e.param.sizes()) {
      throw std::runtime_error("checkpoint: momentum buffer '" + key + "' has shape " +
                               std::string(c10::str(tensor.sizes())) + ", the parameter " +
                               std::string(c10::str(e.param.sizes())));
    }
    e.momentum_buffer = tensor.to(e.param.device(), e.param.scalar_type()).clone();
  }
}

}  // namespace mrcnn::engine
