#pragma once
// StandardROIHeads (torchvision's RoIHeads with MultiScaleRoIAlign, Detectron2's
// StandardROIHeads): the box head and predictor over the sampled proposals (training) or every
// proposal (inference), then the mask head over the positives or the detections, then the
// keypoint head the same way. Children: box_head, box_predictor, mask_head, mask_predictor,
// keypoint_head, keypoint_predictor (torchvision's names). Res5ROIHeads and CascadeROIHeads
// derive from it: the first builds other heads, the second other box stages.
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/model/box_losses.h"
#include "trainer/model/config.h"
#include "trainer/model/forward_context.h"
#include "trainer/model/registry.h"
#include "trainer/model/roi_heads/roi_heads.h"

namespace mrcnn::model {

class FastRcnnPredictor;
class MaskRcnnPredictor;

class StandardRoiHeads : public RoiHeads {
 public:
  StandardRoiHeads(const ModelConfig& config, SharedContext context);
  std::map<std::string, at::Tensor> Forward(
      const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes,
      const std::vector<ImageTarget>* targets, std::vector<ImageResult>* detections,
      const std::vector<at::Tensor>* proposal_valid = nullptr) override;

  // RoIAlign of the box pooler over per-image boxes (resized-image pixels): R x C x P x P.
  using BoxPooler = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
  // The ROI heads' training samples per image: ground truth appended to the proposals,
  // proposals matched and sampled, with the sampled labels, matched gt indices, matched gt
  // boxes and their encoded box targets. Per image, a fixed number of rows
  // (min(box_batch_size_per_image, candidates)): the sampled proposals first, then padding
  // rows that `valid` (bool) marks false.
  struct RoiSamples {
    std::vector<at::Tensor> proposals, labels, matched_idxs, regression_targets, matched_boxes,
        valid;
  };
  // The box stage, Forward's first part: losses from the samples (training), or each image's
  // detections from every proposal (inference), in resized-image pixels. Public for tests that
  // give it their own samples and pooler.
  virtual std::map<std::string, at::Tensor> BoxLosses(
      const BoxPooler& pool, const RoiSamples& samples, const std::vector<ImageTarget>& targets,
      const std::vector<std::array<int64_t, 2>>& image_sizes);
  virtual std::vector<ImageResult> BoxDetections(
      const BoxPooler& pool, const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes);

 protected:
  // Registers the box head (ROI_BOX_HEAD.NAME) and its predictor only; the derived class
  // registers the rest (RegisterMaskHead, RegisterKeypointHead) in its constructor, so the
  // parameters keep torchvision's order (box, cascade stages, mask, keypoint).
  struct BoxHeadOnly {};
  StandardRoiHeads(const ModelConfig& config, SharedContext context, BoxHeadOnly);
  // mask_predictor over `head`'s features; `head` is registered as mask_head when
  // register_head (false: it reads another child's parameters, Res5ROIHeads' trunk).
  void RegisterMaskHead(std::shared_ptr<MaskHead> head, bool register_head);
  void RegisterKeypointHead();

  // The box head's losses (classification, box regression) over the concatenated RoIs: the
  // cross-entropy over the `valid` rows and the regression over the valid foreground ones
  // (class-specific deltas read at each RoI's label, class-agnostic ones at column 0), each
  // divided by the number of valid rows. The standard head's and each cascade stage's.
  std::pair<at::Tensor, at::Tensor> BoxHeadLosses(
      const at::Tensor& class_logits, const at::Tensor& box_regression, const at::Tensor& labels,
      const at::Tensor& valid, const at::Tensor& regression_targets, const at::Tensor& proposals,
      const at::Tensor& matched_boxes, const std::array<double, 4>& weights) const;
  // One image's detections from its clipped per-class boxes (R×K×4) and softmax scores (R×K):
  // background dropped, score threshold, tiny boxes dropped, per-class NMS, top N.
  ImageResult SelectDetections(at::Tensor boxes, at::Tensor scores) const;

  ModelConfig config_;
  SharedContext context_;
  std::shared_ptr<BoxHead> box_head_;
  std::shared_ptr<FastRcnnPredictor> box_predictor_;

 private:
  RoiSamples SampleRoiTargets(const std::vector<ImageTarget>& targets,
                              const std::vector<at::Tensor>& proposals,
                              const std::vector<at::Tensor>* proposal_valid) const;
  // Every image's detections from the box head's outputs over the concatenated proposals.
  std::vector<ImageResult> SelectAllDetections(
      const at::Tensor& class_logits, const at::Tensor& box_regression,
      const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes) const;
  // The pyramid levels RoIAlign pools from (channels-last float32 in CPU inference).
  std::vector<at::Tensor> PooledMaps(const std::vector<at::Tensor>& features) const;
  // Each detection's mask probabilities (N×1×M×M) from the detections' class mask logits, in
  // detection order across images.
  void AttachMasks(const at::Tensor& mask_logits, std::vector<ImageResult>& detections) const;
  // The rows the mask and keypoint heads train on, per image: the sampled positives first
  // (stable sort, row order), either a fixed number of rows (as many as the sampler can make
  // positive, the rest padding that `valid` marks false) or exactly the positives, counted on
  // the host.
  struct MaskRows {
    std::vector<at::Tensor> boxes, matched;
    at::Tensor valid;
  };
  MaskRows SelectMaskRows(const RoiSamples& samples, const std::vector<ImageTarget>& targets,
                          bool fixed_rows) const;
  // The mask head over `rows`: its loss into `losses` in training, else each detection's mask.
  void MaskStage(const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                 const MaskRows& rows, const std::vector<ImageTarget>* targets,
                 std::vector<ImageResult>* detections, std::map<std::string, at::Tensor>& losses);
  // The mask loss over the positive RoIs (`mask_boxes`, matched to gt `mask_matched`).
  // `valid` (bool, one per mask row): the rows that are positives, not padding.
  at::Tensor MaskLoss(const at::Tensor& mask_logits, const std::vector<ImageTarget>& targets,
                      const std::vector<at::Tensor>& mask_boxes,
                      const std::vector<at::Tensor>& mask_matched, const at::Tensor& valid) const;
  // The keypoint head over `rows`: its loss into `losses` in training, else each detection's
  // keypoints.
  void KeypointStage(const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                     const MaskRows& rows, const std::vector<ImageTarget>* targets,
                     std::vector<ImageResult>* detections,
                     std::map<std::string, at::Tensor>& losses);

  BoxRegLoss box_loss_ = BoxRegLoss::kSmoothL1;
  std::shared_ptr<MaskHead> mask_head_;                // null without MODEL.MASK_ON
  std::shared_ptr<MaskRcnnPredictor> mask_predictor_;  // null without MODEL.MASK_ON
  std::shared_ptr<KeypointHead> keypoint_head_;        // null without MODEL.KEYPOINT_ON
};

}  // namespace mrcnn::model
