#pragma once
// RetinaNet (MODEL.META_ARCHITECTURE, Detectron2's RetinaNet): one stage, the dense head
// (child "head", retinanet_head.h) over P3-P7 on Detectron2's anchors (sizes x aspect ratios
// per level), and from its outputs the training losses or the detections; no proposal
// generator and no ROI heads.
#include <memory>
#include <vector>

#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::model {

class RetinaNetHead;

class RetinaNet : public MetaArchitecture {
 public:
  // Its detections use MODEL.RETINANET.SCORE_THRESH_TEST; it predicts no masks.
  explicit RetinaNet(const ModelConfig& config);
  // The backbone's pyramid and the dense head's class logits and box deltas per level.
  FeatureStageOutput FeatureStage(const at::Tensor& batch) override;
  std::vector<at::Tensor> FeatureStageParameters() const override;
  // Training: losses {loss_cls, loss_box_reg}: the sigmoid focal loss over every anchor not
  // ignored by the matcher (IoU in [bg, fg) of RETINANET.IOU_THRESHOLDS) and smooth L1
  // (SMOOTH_L1_LOSS_BETA) on the foreground's deltas, both divided by the moving average of
  // the foreground count. Everything on the device: no host read.
  // Eval: each image's instances in resized-image pixels: per level the scores above the
  // threshold, at most TOPK_CANDIDATES_TEST of them, decoded; then NMS per class over all
  // levels (NMS_THRESH_TEST) and the best DETECTIONS_PER_IMAGE.
  ModelOutput Heads(const ImageBatch& batch, const FeatureStageOutput& stage,
                    const std::vector<ImageTarget>* targets) override;

 private:
  std::map<std::string, at::Tensor> Losses(const at::Tensor& anchors,
                                           const std::vector<at::Tensor>& logits,
                                           const std::vector<at::Tensor>& deltas,
                                           const std::vector<ImageTarget>& targets);
  ImageResult Detect(const at::Tensor& anchors, const std::vector<at::Tensor>& logits,
                     const std::vector<at::Tensor>& deltas, const std::vector<int64_t>& per_level,
                     int64_t image) const;
  std::shared_ptr<RetinaNetHead> head_;
};

// Detectron2's (fvcore's) sigmoid focal loss, summed: logits and 0/1 targets of one shape.
at::Tensor SigmoidFocalLossSum(const at::Tensor& logits, const at::Tensor& targets, double alpha,
                               double gamma);

}  // namespace mrcnn::model
