#include "trainer/engine/distributed/gradient_buckets.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mrcnn::engine::dist {

std::vector<GradientBucket> LayoutGradientBuckets(const std::vector<at::Tensor>& params,
                                                  size_t bucket_bytes) {
  const auto limit = static_cast<int64_t>(std::max<size_t>(bucket_bytes, sizeof(float)) / 4);
  std::vector<GradientBucket> buckets;
  for (size_t k = params.size(); k-- > 0;) {
    const at::Tensor& p = params[k];
    if (p.scalar_type() != at::kFloat) {
      throw std::runtime_error("data-parallel training averages float32 gradients; parameter " +
                               std::to_string(k) + " is " +
                               std::string(c10::toString(p.scalar_type())));
    }
    const bool start_new =
        buckets.empty() || (buckets.back().numel > 0 &&
                            (buckets.back().numel + p.numel() > limit ||
                             params[buckets.back().params.front()].device() != p.device()));
    if (start_new)
      buckets.emplace_back();
    buckets.back().params.push_back(k);
    buckets.back().offsets.push_back(buckets.back().numel);
    buckets.back().numel += p.numel();
  }
  for (auto& b : buckets)
    b.flat = at::empty({b.numel}, params[b.params.front()].options().requires_grad(false));
  return buckets;
}

void PackGradient(const at::Tensor& param, GradientBucket& bucket, size_t i) {
  c10::NoGradGuard no_grad;
  at::Tensor slot = bucket.flat.narrow(0, bucket.offsets[i], param.numel());
  const at::Tensor& g = param.grad();
  if (g.defined())
    slot.copy_(g.reshape({-1}));
  else
    slot.zero_();
}

void UnpackMean(GradientBucket& bucket, std::vector<at::Tensor>& params, int world_size) {
  c10::NoGradGuard no_grad;
  // Exact for the power-of-two world sizes of one node; the same op on every rank anyway.
  bucket.flat.div_(static_cast<double>(world_size));
  for (size_t i = 0; i < bucket.params.size(); ++i) {
    at::Tensor& p = params[bucket.params[i]];
    at::Tensor slot = bucket.flat.narrow(0, bucket.offsets[i], p.numel()).view(p.sizes());
    if (p.grad().defined())
      p.mutable_grad().copy_(slot);
    else
      p.mutable_grad() = slot.clone();
  }
}

}  // namespace mrcnn::engine::dist
