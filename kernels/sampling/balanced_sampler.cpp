#include "kernels/sampling/balanced_sampler.h"

#include <ATen/ATen.h>

namespace mrcnn::kernels {

std::tuple<at::Tensor, at::Tensor> SampleBalancedMasks(
    const at::Tensor& labels, int64_t batch_size_per_image, double positive_fraction,
    const std::optional<at::Generator>& generator) {
  const char* op = "mrcnn::sample_balanced";
  TORCH_CHECK(labels.dim() == 1, op, ": labels must be 1-D (one image), got shape ",
              labels.sizes());
  TORCH_CHECK(batch_size_per_image >= 0, op, ": batch_size_per_image must be >= 0");
  TORCH_CHECK(positive_fraction >= 0 && positive_fraction <= 1, op,
              ": positive_fraction must be in [0, 1], got ", positive_fraction);
  const at::Tensor positive = labels >= 1;
  const at::Tensor negative = labels == 0;
  const int64_t n = labels.size(0);
  if (n == 0) {
    return {positive, negative};
  }
  // int(batch * fraction) as in torchvision.
  const auto target_pos = static_cast<int64_t>(batch_size_per_image * positive_fraction);
  const at::Tensor pos_count = positive.sum();
  const at::Tensor num_pos = at::clamp_max(pos_count, target_pos);
  const at::Tensor num_neg = at::minimum(negative.sum(), batch_size_per_image - num_pos);

  const auto f64 = labels.options().dtype(at::kDouble);
  const at::Tensor key = at::rand({n}, generator, f64);
  // Positives in [0,1), negatives in [2,3), ignored at 4: one sort ranks both groups.
  const at::Tensor grouped =
      at::where(positive, key, at::where(negative, key + 2, at::scalar_tensor(4.0, f64)));
  const at::Tensor order = at::argsort(grouped);
  const at::Tensor rank = at::empty_like(order).scatter_(0, order, at::arange(n, order.options()));
  const at::Tensor pos_mask = positive & (rank < num_pos);
  const at::Tensor neg_mask = negative & ((rank - pos_count) < num_neg);
  return {pos_mask, neg_mask};
}

}  // namespace mrcnn::kernels
