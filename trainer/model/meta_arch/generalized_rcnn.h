#pragma once
// GeneralizedRCNN (MODEL.META_ARCHITECTURE, Detectron2's GeneralizedRCNN, torchvision's
// GeneralizedRCNN with its transform): backbone -> proposal generator
// (MODEL.PROPOSAL_GENERATOR.NAME, child "rpn") -> ROI heads (MODEL.ROI_HEADS.NAME, child
// "roi_heads"). Faster, Mask, Keypoint and Cascade R-CNN are this class with other registered
// parts.
#include <memory>
#include <vector>

#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::model {

class ProposalGenerator;
class RoiHeads;

class GeneralizedRcnn : public MetaArchitecture {
 public:
  explicit GeneralizedRcnn(const ModelConfig& config);
  // The backbone's pyramid and the proposal generator's dense head over it.
  FeatureStageOutput FeatureStage(const at::Tensor& batch) override;
  std::vector<at::Tensor> FeatureStageParameters() const override;
  // Proposals, then the ROI heads over the levels they pool from.
  ModelOutput Heads(const ImageBatch& batch, const FeatureStageOutput& stage,
                    const std::vector<ImageTarget>* targets) override;

  // The parts, for tests and probes that run them one by one.
  ProposalGenerator& proposal_generator() { return *proposal_generator_; }
  RoiHeads& roi_heads() { return *roi_heads_; }
  // The levels the ROI heads pool from: the pyramid without the dense heads' own levels.
  std::vector<at::Tensor> PooledLevels(const std::vector<at::Tensor>& features) const;

 private:
  std::shared_ptr<ProposalGenerator> proposal_generator_;
  std::shared_ptr<RoiHeads> roi_heads_;
};

}  // namespace mrcnn::model
