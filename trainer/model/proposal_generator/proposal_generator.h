#pragma once
// What a proposal generator is (Detectron2's PROPOSAL_GENERATOR_REGISTRY entries): given the
// image-wide features, boxes per image for the ROI heads and, in training, its own losses.
// Built by name (MODEL.PROPOSAL_GENERATOR.NAME, registry.h ProposalGeneratorRegistry); its
// module is the meta-architecture's child "rpn".
#include <torch/nn/module.h>

#include <vector>

#include "trainer/model/structures.h"

namespace mrcnn::model {

class ProposalGenerator : public torch::nn::Module {
 public:
  // The image-wide part over stage.features (a dense head's per-level outputs into
  // stage.head_logits / head_deltas): runs inside the feature stage, so its sizes may depend
  // on the maps' shapes only.
  virtual void HeadOutputs(FeatureStageOutput& stage) = 0;
  // The parameters HeadOutputs uses (the feature stage's, after the backbone's).
  virtual std::vector<at::Tensor> HeadParameters() const = 0;
  // Per image, the proposals in resized-image pixels and their scores; in train mode the
  // losses and `valid` (targets required, in the batch's coordinates).
  virtual RpnOutput Forward(const ImageBatch& batch, const FeatureStageOutput& stage,
                            const std::vector<ImageTarget>* targets) = 0;
};

}  // namespace mrcnn::model
