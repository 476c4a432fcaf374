#pragma once
// Mask R-CNN (torchvision's MaskRCNN semantics) assembled from registered parts.
// Parameter names equal torchvision's state_dict keys. In train() mode forward() returns
// the five torchvision losses; in eval() mode, per-image detections in original image
// coordinates. The stages are public so tests and benchmarks can observe them.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/model/box_losses.h"
#include "trainer/model/config.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {

// The stages of the zoo's other families, each in its own room; they reach into the model's
// parts and samples as friends (their headers are included by the stage files only).
class RetinaNetHead;     // retinanet/retinanet_head.h: the dense head's modules
class RetinaNetStage;    // retinanet/retinanet_stage.h: anchors, losses, detections
class CascadeRoiHeads;   // roi_heads/cascade_roi_heads.h: Cascade R-CNN's box stages
class KeypointHead;      // roi_heads/keypoint_head.h: the keypoint head's modules
class KeypointRoiHeads;  // roi_heads/keypoint_roi_heads.h: keypoint targets, loss, decoding

struct ImageTarget {
  at::Tensor boxes;   // G x 4 float, x1 y1 x2 y2 in the input image's pixels
  at::Tensor labels;  // G int64, 1..num_classes
  at::Tensor masks;   // G x H x W uint8 (0/1), required when MODEL.MASK_ON
  // G x K x 3 float (x, y, v: 0 unlabelled, 1 labelled hidden, 2 visible), required when
  // MODEL.KEYPOINT_ON; Transform scales x, y with the boxes.
  at::Tensor keypoints;
};

struct ImageResult {
  at::Tensor boxes;   // N x 4 float, original image pixels
  at::Tensor labels;  // N int64
  at::Tensor scores;  // N float
  at::Tensor masks;   // N x 1 x H x W float probabilities (undefined when masks are off)
  at::Tensor keypoints;  // N x K x 3 float (x, y, score) when MODEL.KEYPOINT_ON, else undefined
};

// Normalised, resized images padded into one tensor; image_sizes are the resized sizes
// before padding (height, width), original_sizes the sizes given to forward().
struct ImageBatch {
  at::Tensor tensors;
  std::vector<std::array<int64_t, 2>> image_sizes;
  std::vector<std::array<int64_t, 2>> original_sizes;
};

// What the image-wide part of the network (backbone, neck and RPN head) computes for a
// batch: every pyramid level (finest first) and the RPN head's objectness logits and box
// deltas per level. Its sizes depend only on the batch tensor's shape, which is what lets
// the trainer capture it in a CUDA graph per padded shape (engine/cuda_graphs).
struct FeatureStageOutput {
  std::vector<at::Tensor> features, rpn_logits, rpn_deltas;
};

struct RpnOutput {
  std::vector<at::Tensor> proposals;         // per image, K x 4 in resized-image pixels
  std::vector<at::Tensor> scores;            // per image, K (sigmoid objectness)
  std::map<std::string, at::Tensor> losses;  // loss_objectness, loss_rpn_box_reg (train only)
  // Training: per image, bool K, false for padding rows. The training step selects a fixed
  // number of proposals (a size known on the host, so no wait for the device): the kept
  // ones first, by score, then padding. Empty in eval mode, where every row is a proposal.
  std::vector<at::Tensor> valid;
  // One-stage detectors (RetinaNet) in eval mode: the final detections per image, in
  // resized-image pixels; proposals and scores are then empty. RoiHeads(features, rpn, ...)
  // hands them on.
  std::vector<ImageResult> detections;
};

struct MaskRcnnOutput {
  std::map<std::string, at::Tensor> losses;  // train mode
  std::vector<ImageResult> detections;       // eval mode
};

// Inference-time switches that do not change the weights.
struct DetectionSettings {
  double score_thresh = 0.05;
  int detections_per_image = 100;
  bool masks = true;
  // >= 0: masks come back pasted as uint8 0/1 (mask >= threshold); < 0: as probabilities.
  double mask_threshold = -1.0;
  // false: masks come back as the mask head's N x 1 x R x R probabilities for the boxes
  // (in original pixels), unpasted, so a caller can paste each one into its box only
  // (tiled inference: a full-image mask per detection of an 8000x6000 image is 48 MB).
  bool paste_masks = true;
};

class MaskRcnnImpl : public torch::nn::Module {
 public:
  explicit MaskRcnnImpl(const ModelConfig& config);

  // images: 3 x H x W float in [0, 1], RGB (torchvision's input convention).
  // targets: required in train mode, in the coordinates of `images`.
  MaskRcnnOutput forward(const std::vector<at::Tensor>& images,
                         const std::optional<std::vector<ImageTarget>>& targets = std::nullopt);

  // Stages (torchvision: transform, backbone, rpn, roi_heads, transform.postprocess).
  // Transform rescales `targets` in place when given.
  ImageBatch Transform(const std::vector<at::Tensor>& images, std::vector<ImageTarget>* targets);
  std::vector<at::Tensor> Features(const at::Tensor& batch);  // all pyramid levels, finest first
  RpnOutput Rpn(const ImageBatch& batch, const std::vector<at::Tensor>& features,
                const std::vector<ImageTarget>* targets);
  // Features and the RPN head on `batch` in one call, and the RPN from them: Features +
  // Rpn split where the work stops depending on the data. Same results as those two.
  FeatureStageOutput FeatureStage(const at::Tensor& batch);
  RpnOutput Rpn(const ImageBatch& batch, const FeatureStageOutput& stage,
                const std::vector<ImageTarget>* targets);
  // The parameters FeatureStage uses that require gradients (backbone, neck, RPN head), in
  // a fixed order.
  std::vector<at::Tensor> FeatureStageParameters() const;
  // Returns losses in train mode, otherwise fills `detections` (resized-image coordinates).
  // `proposal_valid` (Rpn's `valid`, train mode): padding proposals are never sampled.
  std::map<std::string, at::Tensor> RoiHeads(
      const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes,
      const std::vector<ImageTarget>* targets, std::vector<ImageResult>* detections,
      const std::vector<at::Tensor>* proposal_valid = nullptr);
  // RoiHeads on rpn.proposals (and rpn.valid in training) for two-stage models; for a
  // one-stage model (RetinaNet) nothing: its losses are the RPN stage's and its detections
  // (eval) are moved from rpn.detections.
  std::map<std::string, at::Tensor> RoiHeads(const std::vector<at::Tensor>& features,
                                             RpnOutput& rpn,
                                             const std::vector<std::array<int64_t, 2>>& image_sizes,
                                             const std::vector<ImageTarget>* targets,
                                             std::vector<ImageResult>* detections);
  // Boxes back to original coordinates and masks pasted into the original image.
  void Postprocess(const ImageBatch& batch, std::vector<ImageResult>& detections) const;

  const ModelConfig& config() const { return config_; }
  DetectionSettings& detection_settings() { return settings_; }
  // Generators for the RPN and RoI-head samplers, one per image of the next training batch
  // (image i draws from [i]); empty: the global generator. The trainer seeds them per
  // image so the sampled anchors and RoIs of an image do not depend on which other images
  // share its batch, which makes W processes with batch B/W match one with batch B.
  // How many RoIs the mask head trains on per image. Fixed (true): as many as the sampler
  // can make positive, padding included, so no size depends on the device's values and
  // the step never waits for the GPU; exact (false): the image's positives, found with a
  // host read, which costs nothing on a CPU, where the padded rows would be real work
  // (several times the mask head's compute early in training). Default (nullopt): fixed
  // on CUDA, exact elsewhere. Same losses and gradients either way.
  void set_fixed_mask_rows(std::optional<bool> fixed) { fixed_mask_rows_ = fixed; }

  void set_sampling_generators(std::vector<at::Generator> generators) {
    sampling_generators_ = std::move(generators);
  }

  // Called with nullptr when forward() starts and then at the end of each of its stages with
  // the stage's name (transform, backbone, fpn, rpn, roi_maps, box_pool, box_head,
  // box_select, mask_pool, mask_head, paste); benchmarks time the gaps between calls.
  void set_phase_hook(std::function<void(const char*)> hook) { phase_hook_ = std::move(hook); }
  const std::function<void(const char*)>& phase_hook() const { return phase_hook_; }

 private:
  friend class RetinaNetStage;
  friend class CascadeRoiHeads;
  friend class KeypointRoiHeads;
  void Phase(const char* name) const {
    if (phase_hook_)
      phase_hook_(name);
  }
  std::function<void(const char*)> phase_hook_;
  ModelConfig config_;
  BoxRegLoss rpn_box_loss_ = BoxRegLoss::kSmoothL1;
  BoxRegLoss box_loss_ = BoxRegLoss::kSmoothL1;
  DetectionSettings settings_;
  std::vector<at::Generator> sampling_generators_;
  std::optional<bool> fixed_mask_rows_;
  std::optional<at::Generator> SamplingGenerator(size_t image) const;
  // The ROI heads' training samples per image: ground truth appended to the proposals,
  // proposals matched and sampled (`proposals` is replaced by the sampled ones), with the
  // sampled labels, matched gt indices, matched gt boxes and their encoded box targets.
  // Per image, a fixed number of rows (min(box_batch_size_per_image, candidates)): the
  // sampled proposals first, then padding rows that `valid` (bool) marks false.
  struct RoiSamples {
    std::vector<at::Tensor> labels, matched_idxs, regression_targets, matched_boxes, valid;
  };
  RoiSamples SampleRoiTargets(const std::vector<ImageTarget>& targets,
                              std::vector<at::Tensor>& proposals,
                              const std::vector<at::Tensor>* proposal_valid) const;
  // One image's detections from its clipped per-class boxes (R×K×4) and softmax scores (R×K):
  // background dropped, score threshold, tiny boxes dropped, per-class NMS, top N.
  ImageResult SelectDetections(at::Tensor boxes, at::Tensor scores) const;
  // Rpn's proposals per image (out.proposals, out.scores) from the decoded anchors
  // (N x A x 4), their objectness logits and the anchors per level.
  void FilterProposals(const ImageBatch& batch, const at::Tensor& proposals,
                       const at::Tensor& objectness, const std::vector<int64_t>& per_level,
                       RpnOutput& out) const;
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
  // The rows the mask head trains on, per image: the sampled positives first (stable sort,
  // row order), either a fixed number of rows (as many as the sampler can make positive, the
  // rest padding that `valid` marks false) or exactly the positives, counted on the host.
  struct MaskRows {
    std::vector<at::Tensor> boxes, matched;
    at::Tensor valid;
  };
  MaskRows SelectMaskRows(const RoiSamples& samples, const std::vector<at::Tensor>& proposals,
                          const std::vector<ImageTarget>& targets, bool fixed_rows) const;
  // The box head's losses (classification, box regression) over the concatenated RoIs: the
  // cross-entropy over the `valid` rows and the regression over the valid foreground ones
  // (class-specific deltas read at each RoI's label, class-agnostic ones at column 0), each
  // divided by the number of valid rows. The standard head's and each cascade stage's.
  std::pair<at::Tensor, at::Tensor> BoxHeadLosses(
      const at::Tensor& class_logits, const at::Tensor& box_regression, const at::Tensor& labels,
      const at::Tensor& valid, const at::Tensor& regression_targets, const at::Tensor& proposals,
      const at::Tensor& matched_boxes, const std::array<double, 4>& weights) const;
  // The mask head over `rows`: its loss into `losses` in training, else each detection's mask.
  void MaskStage(const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                 const MaskRows& rows, const std::vector<ImageTarget>* targets,
                 std::vector<ImageResult>* detections, std::map<std::string, at::Tensor>& losses);
  // The mask loss over the positive RoIs (`mask_boxes`, matched to gt `mask_matched`).
  // `valid` (bool, one per mask row): the rows that are positives, not padding.
  at::Tensor MaskLoss(const at::Tensor& mask_logits, const std::vector<ImageTarget>& targets,
                      const std::vector<at::Tensor>& mask_boxes,
                      const std::vector<at::Tensor>& mask_matched, const at::Tensor& valid) const;
  std::shared_ptr<BackboneBody> body_;
  std::shared_ptr<Neck> neck_;
  std::shared_ptr<RpnHead> rpn_head_;
  std::shared_ptr<BoxHead> box_head_;
  std::shared_ptr<FastRcnnPredictor> box_predictor_;
  std::shared_ptr<MaskHead> mask_head_;
  std::shared_ptr<MaskRcnnPredictor> mask_predictor_;
  // RetinaNet (config_.retinanet()): the dense head in place of rpn_head_; no ROI heads.
  std::shared_ptr<RetinaNetHead> retinanet_head_;
  // Cascade R-CNN: stage s > 0's box head and predictor at [s - 1] (stage 0 is box_head_ and
  // box_predictor_).
  std::vector<std::shared_ptr<BoxHead>> cascade_box_heads_;
  std::vector<std::shared_ptr<FastRcnnPredictor>> cascade_box_predictors_;
  std::shared_ptr<KeypointHead> keypoint_head_;  // MODEL.KEYPOINT_ON
};
TORCH_MODULE(MaskRcnn);

}  // namespace mrcnn::model
