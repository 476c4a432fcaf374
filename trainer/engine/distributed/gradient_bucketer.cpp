#include "trainer/engine/distributed/gradient_bucketer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <stdexcept>
#include <string>

namespace mrcnn::engine::dist {

GradientBucketer::GradientBucketer(std::vector<at::Tensor> params, size_t bucket_bytes)
    : params_(std::move(params)) {
  const auto limit = static_cast<int64_t>(std::max<size_t>(bucket_bytes, sizeof(float)) / 4);
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    if (p.scalar_type() != at::kFloat) {
      throw std::runtime_error("data-parallel training averages float32 gradients; parameter " +
                               std::to_string(k) + " is " +
                               std::string(c10::toString(p.scalar_type())));
    }
    // A new bucket when the current one would overflow or the device changes (a parameter
    // larger than a bucket gets one of its own).
    const bool start_new =
        buckets_.empty() || (buckets_.back().numel > 0 &&
                             (buckets_.back().numel + p.numel() > limit ||
                              params_[buckets_.back().params.front()].device() != p.device()));
    if (start_new)
      buckets_.emplace_back();
    buckets_.back().params.push_back(k);
    buckets_.back().numel += p.numel();
  }
  for (auto& b : buckets_)
    b.flat = at::empty({b.numel}, params_[b.params.front()].options().requires_grad(false));
}

void GradientBucketer::AllReduceMean(GradientReducer& reducer, int world_size) {
  c10::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    int64_t offset = 0;
    for (size_t k : b.params) {
      const at::Tensor& g = params_[k].grad();
      at::Tensor slot = b.flat.narrow(0, offset, params_[k].numel());
      if (g.defined())
        slot.copy_(g.reshape({-1}));
      else
        slot.zero_();
      offset += params_[k].numel();
    }
    reducer.SumInPlace(b.flat);
    // Exact for the power-of-two world sizes of one node; the same op on every rank anyway.
    b.flat.div_(static_cast<double>(world_size));
    offset = 0;
    for (size_t k : b.params) {
      at::Tensor& p = params_[k];
      at::Tensor slot = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(slot);
      else
        p.mutable_grad() = slot.clone();
      offset += p.numel();
    }
  }
}

}  // namespace mrcnn::engine::dist
