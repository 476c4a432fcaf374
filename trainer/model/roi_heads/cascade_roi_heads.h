#pragma once
// Cascade R-CNN's ROI heads (MODEL.ROI_HEADS.NAME CascadeROIHeads, Detectron2's
// CascadeROIHeads): StandardROIHeads with one box head and predictor per stage. Stage 0 is
// the standard box_head / box_predictor, stage s > 0 roi_heads.cascade.{s}.box_head /
// box_predictor; every predictor is class-agnostic (4 deltas per RoI) and stage s decodes with
// MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS[s]. The mask and keypoint heads are
// StandardROIHeads': in training they see stage 0's samples, at inference the final
// detections.
#include <memory>
#include <vector>

#include "trainer/model/roi_heads/standard_roi_heads.h"

namespace mrcnn::model {

class CascadeRoiHeads : public StandardRoiHeads {
 public:
  CascadeRoiHeads(const ModelConfig& config, SharedContext context);

  // Training: loss_cls_stage{s} and loss_box_reg_stage{s} for every stage. Stage s > 0 runs
  // on the previous stage's boxes (detached, clipped), every one of them re-matched at
  // MODEL.ROI_BOX_CASCADE_HEAD.IOUS[s] without subsampling; boxes that clipping leaves empty
  // are dropped from that stage's losses (marked invalid rather than removed, so no size
  // depends on the data and a CUDA step does not wait for the device). The pooled features
  // reach each stage with their gradient scaled by 1 / num_stages (Detectron2's
  // _ScaleGradient). Means are over each stage's valid rows, as Detectron2's per stage.
  std::map<std::string, at::Tensor> BoxLosses(
      const BoxPooler& pool, const RoiSamples& samples, const std::vector<ImageTarget>& targets,
      const std::vector<std::array<int64_t, 2>>& image_sizes) override;
  // Inference: each stage refines the previous stage's clipped boxes; the detections are
  // the last stage's boxes scored by the mean of every stage's softmax scores, then the
  // standard selection (score threshold, per-class NMS, top k). Resized-image pixels.
  std::vector<ImageResult> BoxDetections(
      const BoxPooler& pool, const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes) override;

 private:
  // Stage s's box head and predictor: stage 0 is the standard head's pair.
  std::pair<BoxHead*, FastRcnnPredictor*> Stage(size_t s) const;
  std::vector<std::shared_ptr<BoxHead>> stage_heads_;                 // stages 1..
  std::vector<std::shared_ptr<FastRcnnPredictor>> stage_predictors_;  // stages 1..
};

}  // namespace mrcnn::model
