#include "trainer/engine/hooks/parameter_histograms.h"

#include <torch/torch.h>

#include "trainer/engine/train_step.h"

namespace mrcnn::engine {
namespace {

at::Tensor Flat(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  for (const auto& t : tensors) {
    if (t.defined())
      parts.push_back(t.detach().to(torch::kCPU, torch::kFloat).reshape({-1}));
  }
  return parts.empty() ? at::Tensor() : torch::cat(parts);
}

}  // namespace

std::string ParameterGroup(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    parts.push_back(name.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(name.substr(start));
  const size_t keep = parts.size() > 3 && parts[0] == "backbone" && parts[1] == "body" ? 3 : 2;
  std::string group;
  for (size_t i = 0; i < std::min(keep, parts.size() - 1); ++i)
    group += (group.empty() ? "" : ".") + parts[i];
  return group.empty() ? parts.front() : group;
}

HistogramEvent HistogramOf(const at::Tensor& values, const std::string& tag, int64_t iteration) {
  HistogramEvent h;
  h.iteration = iteration;
  h.tag = tag;
  const at::Tensor v = values.to(torch::kDouble);
  h.num = static_cast<double>(v.numel());
  if (v.numel() == 0)
    return h;
  h.min = v.min().item<double>();
  h.max = v.max().item<double>();
  h.sum = v.sum().item<double>();
  h.sum_squares = v.pow(2).sum().item<double>();
  constexpr int kBuckets = 30;
  const double lo = h.min, hi = h.max > h.min ? h.max : h.min + 1e-12;
  const at::Tensor counts = torch::histc(v, kBuckets, lo, hi).contiguous();
  const double* c = counts.data_ptr<double>();
  for (int b = 0; b < kBuckets; ++b) {
    h.bucket_limits.push_back(lo + (hi - lo) * (b + 1) / kBuckets);
    h.bucket_counts.push_back(c[b]);
  }
  return h;
}

ParameterHistogramsHook::ParameterHistogramsHook(int64_t period, const NamedParameters& parameters,
                                                 TrainStep& step)
    : period_(period) {
  for (const auto& [name, p] : parameters)
    groups_[ParameterGroup(name)].push_back(p);
  // The probe runs when the parameters' own .grad() are final: read them there.
  step.set_gradient_probe([this](const std::vector<at::Tensor>&, const at::Tensor& found_inf) {
    if (!armed_)
      return;
    found_inf_ = found_inf;
    torch::NoGradGuard no_grad;
    for (const auto& [group, params] : groups_) {
      std::vector<at::Tensor> grads;
      for (const auto& p : params)
        grads.push_back(p.grad());
      if (auto flat = Flat(grads); flat.defined())
        gradients_[group] = flat;
    }
  });
}

void ParameterHistogramsHook::BeforeStep(TrainerBase& trainer) {
  armed_ = period_ > 0 && trainer.done() % period_ == 0;
  gradients_.clear();
  found_inf_ = at::Tensor();
}

void ParameterHistogramsHook::AfterStep(TrainerBase& trainer) {
  if (!armed_)
    return;
  armed_ = false;
  torch::NoGradGuard no_grad;
  EventStorage& s = trainer.storage();
  const int64_t step = trainer.done();
  for (const auto& [group, params] : groups_) {
    const at::Tensor w = Flat(params);
    s.PutScalar("weights_norm/" + group, w.norm().item<double>());
    s.PutHistogram(HistogramOf(w, "weights/" + group, step));
  }
  // A step that overflowed (fp16) was skipped: its gradients are not the run's. This hook
  // reads values to the host anyway; the flag is one more.
  if (found_inf_.defined() && found_inf_.item<float>() != 0)
    gradients_.clear();
  for (const auto& [group, g] : gradients_) {
    s.PutScalar("grads_norm/" + group, g.norm().item<double>());
    s.PutHistogram(HistogramOf(g, "grads/" + group, step));
  }
  gradients_.clear();
}

}  // namespace mrcnn::engine
