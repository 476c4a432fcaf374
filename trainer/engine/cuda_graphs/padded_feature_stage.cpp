#include "trainer/engine/cuda_graphs/padded_feature_stage.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::engine {
namespace {

std::vector<at::Tensor> FirstImages(const std::vector<at::Tensor>& tensors, int64_t n) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors)
    out.push_back(t.narrow(0, 0, n));
  return out;
}

}  // namespace

PaddedFeatureStage::PaddedFeatureStage(model::MetaArchitecture& net,
                                       std::vector<std::array<int64_t, 2>> shapes,
                                       int64_t full_batch)
    : net_(net), shapes_(std::move(shapes)), full_batch_(full_batch) {
  if (full_batch_ < 1)
    throw std::invalid_argument("PaddedFeatureStage: full_batch must be >= 1");
}

std::optional<size_t> PaddedFeatureStage::PickShape(int64_t height, int64_t width) const {
  std::optional<size_t> best;
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const auto [h, w] = shapes_[i];
    if (h < height || w < width)
      continue;
    if (!best || h * w < shapes_[*best][0] * shapes_[*best][1])
      best = i;
  }
  return best;
}

model::FeatureStageOutput PaddedFeatureStage::Run(const at::Tensor& batch, at::Tensor* rpn_input) {
  const int64_t n = batch.size(0);
  const std::optional<size_t> shape =
      n <= full_batch_ ? PickShape(batch.size(2), batch.size(3)) : std::nullopt;
  if (!shape) {
    ++eager_runs_;
    *rpn_input = batch;
    return net_.FeatureStage(batch);
  }
  ++padded_runs_;
  const auto [h, w] = shapes_[*shape];
  at::Tensor padded = torch::zeros({full_batch_, batch.size(1), h, w}, batch.options());
  padded.narrow(0, 0, n).narrow(2, 0, batch.size(2)).narrow(3, 0, batch.size(3)).copy_(batch);
  model::FeatureStageOutput full = RunPadded(*shape, padded);
  *rpn_input = padded.narrow(0, 0, n);
  if (n == full_batch_)
    return full;
  return {FirstImages(full.features, n), FirstImages(full.head_logits, n),
          FirstImages(full.head_deltas, n)};
}

model::FeatureStageOutput PaddedFeatureStage::RunPadded(size_t /*shape_index*/,
                                                        const at::Tensor& padded) {
  return net_.FeatureStage(padded);
}

}  // namespace mrcnn::engine
