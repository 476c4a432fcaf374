#pragma once
// The region proposal network (MODEL.PROPOSAL_GENERATOR.NAME "RPN"): the registered RPN head
// (MODEL.RPN.HEAD_NAME, child "head") over every level, anchors (torchvision's, or
// Detectron2's unrounded ones under its convention), per-level top-k, NMS and the best
// POST_NMS_TOPK; in training the anchors' matching, balanced sampling, objectness and box
// losses (MODEL.RPN.BBOX_REG_LOSS_TYPE, BBOX_REG_LOSS_WEIGHT).
#include <memory>
#include <vector>

#include "trainer/model/box_losses.h"
#include "trainer/model/config.h"
#include "trainer/model/forward_context.h"
#include "trainer/model/proposal_generator/proposal_generator.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {

class Rpn : public ProposalGenerator {
 public:
  Rpn(const ModelConfig& config, SharedContext context);
  void HeadOutputs(FeatureStageOutput& stage) override;
  std::vector<at::Tensor> HeadParameters() const override;
  RpnOutput Forward(const ImageBatch& batch, const FeatureStageOutput& stage,
                    const std::vector<ImageTarget>* targets) override;

 private:
  // The proposals per image (out.proposals, out.scores; out.valid in training) from the
  // decoded anchors (N x A x 4), their objectness logits and the anchors per level.
  void FilterProposals(const ImageBatch& batch, const at::Tensor& proposals,
                       const at::Tensor& objectness, const std::vector<int64_t>& per_level,
                       RpnOutput& out) const;
  ModelConfig config_;
  SharedContext context_;
  BoxRegLoss box_loss_ = BoxRegLoss::kSmoothL1;
  std::shared_ptr<RpnHead> head_;
};

}  // namespace mrcnn::model
