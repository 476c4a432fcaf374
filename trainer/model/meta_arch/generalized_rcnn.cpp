// GeneralizedRCNN (generalized_rcnn.h).
#include "trainer/model/meta_arch/generalized_rcnn.h"

#include <torch/torch.h>

#include "trainer/model/backbone/backbone.h"
#include "trainer/model/proposal_generator/proposal_generator.h"
#include "trainer/model/registry.h"
#include "trainer/model/roi_heads/roi_heads.h"

namespace mrcnn::model {

GeneralizedRcnn::GeneralizedRcnn(const ModelConfig& config) : MetaArchitecture(config) {
  proposal_generator_ = register_module(
      "rpn", ProposalGeneratorRegistry().Create(config_.proposal_generator, config_, context()));
  roi_heads_ = register_module(
      "roi_heads", RoiHeadsRegistry().Create(config_.roi_heads_name, config_, context()));
}

FeatureStageOutput GeneralizedRcnn::FeatureStage(const at::Tensor& batch) {
  FeatureStageOutput out;
  out.features = Features(batch);
  proposal_generator_->HeadOutputs(out);
  return out;
}

std::vector<at::Tensor> GeneralizedRcnn::FeatureStageParameters() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : backbone().parameters())
    if (p.requires_grad())
      out.push_back(p);
  for (const at::Tensor& p : proposal_generator_->HeadParameters())
    if (p.requires_grad())
      out.push_back(p);
  return out;
}

std::vector<at::Tensor> GeneralizedRcnn::PooledLevels(
    const std::vector<at::Tensor>& features) const {
  const auto pooled = features.size() - static_cast<size_t>(backbone().NumRpnOnlyLevels());
  return {features.begin(), features.begin() + static_cast<std::ptrdiff_t>(pooled)};
}

ModelOutput GeneralizedRcnn::Heads(const ImageBatch& batch, const FeatureStageOutput& stage,
                                   const std::vector<ImageTarget>* targets) {
  const bool training = is_training();
  RpnOutput rpn = proposal_generator_->Forward(batch, stage, training ? targets : nullptr);
  forward_context().Phase("rpn");
  ModelOutput out;
  const std::vector<at::Tensor> levels = PooledLevels(stage.features);
  if (training) {
    out.losses =
        roi_heads_->Forward(levels, rpn.proposals, batch.image_sizes, targets, nullptr, &rpn.valid);
    for (auto& [name, loss] : rpn.losses)
      out.losses[name] = loss;
    return out;
  }
  std::vector<ImageResult> detections;
  roi_heads_->Forward(levels, rpn.proposals, batch.image_sizes, nullptr, &detections);
  for (ImageResult& r : detections)
    out.images.push_back(ImageOutput{std::move(r)});
  return out;
}

void RegisterGeneralizedRcnn(Registry<MetaArchitecture>& registry) {
  registry.Add("GeneralizedRCNN",
               [](const ModelConfig& c) { return std::make_shared<GeneralizedRcnn>(c); });
}

}  // namespace mrcnn::model
