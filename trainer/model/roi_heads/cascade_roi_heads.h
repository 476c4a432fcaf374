#pragma once
// Cascade R-CNN's box stages (Detectron2's CascadeROIHeads._forward_box), called by RoiHeads
// (roi_heads_stage.cpp) when MODEL.ROI_HEADS.NAME is CascadeROIHeads. Stage 0 is the model's
// box_head_ / box_predictor_, stage s > 0 its cascade_box_heads_[s - 1] /
// cascade_box_predictors_[s - 1]; every predictor is class-agnostic (4 deltas per RoI) and
// stage s decodes with MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS[s]. The mask and keypoint
// heads are RoiHeads' as for StandardROIHeads: in training they see stage 0's samples, at
// inference the final detections.
#include <ATen/core/Tensor.h>

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trainer/model/mask_rcnn.h"

namespace mrcnn::model {

class CascadeRoiHeads {
 public:
  // RoIAlign of the box pooler over per-image boxes (resized-image pixels): R x C x P x P.
  using BoxPooler = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
  // The stage 0 samples as MaskRcnnImpl::SampleRoiTargets makes them: the sampled proposals
  // per image (a fixed number of rows, `valid` false for padding rows), their labels and
  // matched gt boxes.
  struct Stage0Samples {
    const std::vector<at::Tensor>& proposals;
    const std::vector<at::Tensor>& labels;
    const std::vector<at::Tensor>& matched_boxes;
    const std::vector<at::Tensor>& valid;
  };
  // Training: loss_cls_stage{s} and loss_box_reg_stage{s} for every stage. Stage s > 0 runs
  // on the previous stage's boxes (detached, clipped), every one of them re-matched at
  // MODEL.ROI_BOX_CASCADE_HEAD.IOUS[s] without subsampling; boxes that clipping leaves empty
  // are dropped from that stage's losses (marked invalid rather than removed, so no size
  // depends on the data and a CUDA step does not wait for the device). The pooled features
  // reach each stage with their gradient scaled by 1 / num_stages (Detectron2's
  // _ScaleGradient). Means are over each stage's valid rows, as Detectron2's per stage.
  static std::map<std::string, at::Tensor> Losses(
      MaskRcnnImpl& net, const BoxPooler& pool, const Stage0Samples& samples,
      const std::vector<ImageTarget>& targets,
      const std::vector<std::array<int64_t, 2>>& image_sizes);
  // Inference: each stage refines the previous stage's clipped boxes; the detections are
  // the last stage's boxes scored by the mean of every stage's softmax scores, then the
  // standard selection (score threshold, per-class NMS, top k). Resized-image pixels.
  static std::vector<ImageResult> Detect(MaskRcnnImpl& net, const BoxPooler& pool,
                                         const std::vector<at::Tensor>& proposals,
                                         const std::vector<std::array<int64_t, 2>>& image_sizes);
};

}  // namespace mrcnn::model
