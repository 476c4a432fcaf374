#pragma once
// RetinaNet's stage in place of the RPN and ROI heads (Detectron2's RetinaNet.forward): the
// dense head's outputs over Detectron2's anchors (sizes x aspect ratios per level, P3-P7),
// and from them the training losses or the detections. Called by MaskRcnnImpl::Rpn when
// MODEL.META_ARCHITECTURE is RetinaNet.
#include "trainer/model/mask_rcnn.h"

namespace mrcnn::model {

class RetinaNetStage {
 public:
  // Training: losses {loss_cls, loss_box_reg}: the sigmoid focal loss over every anchor not
  // ignored by the matcher (IoU in [bg, fg) of RETINANET.IOU_THRESHOLDS) and smooth L1
  // (SMOOTH_L1_LOSS_BETA) on the foreground's deltas, both divided by the moving average of
  // the foreground count. Everything on the device: no host read.
  // Eval: `detections` per image in resized-image pixels: per level the scores above the
  // threshold, at most TOPK_CANDIDATES_TEST of them, decoded; then NMS per class over all
  // levels (NMS_THRESH_TEST) and the best DETECTIONS_PER_IMAGE.
  static RpnOutput Run(MaskRcnnImpl& net, const ImageBatch& batch, const FeatureStageOutput& stage,
                       const std::vector<ImageTarget>* targets);
  // The dense head on stage.features into stage.rpn_logits / rpn_deltas.
  static void HeadOutputs(MaskRcnnImpl& net, FeatureStageOutput& stage);
};

// Detectron2's (fvcore's) sigmoid focal loss, summed: logits and 0/1 targets of one shape.
at::Tensor SigmoidFocalLossSum(const at::Tensor& logits, const at::Tensor& targets, double alpha,
                               double gamma);

}  // namespace mrcnn::model
