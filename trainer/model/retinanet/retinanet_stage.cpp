// RetinaNet's anchors, losses and detections (retinanet_stage.h).
#include "trainer/model/retinanet/retinanet_stage.h"

#include <torch/torch.h>

#include "kernels/ops.h"
#include "trainer/model/box_losses.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/retinanet/retinanet_head.h"
#include "trainer/model/rpn/detectron2_anchors.h"

namespace mrcnn::model {
namespace F = torch::nn::functional;

at::Tensor SigmoidFocalLossSum(const at::Tensor& logits, const at::Tensor& targets, double alpha,
                               double gamma) {
  const at::Tensor p = torch::sigmoid(logits);
  const at::Tensor ce = F::binary_cross_entropy_with_logits(
      logits, targets, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
  const at::Tensor p_t = p * targets + (1 - p) * (1 - targets);
  at::Tensor loss = ce * (1 - p_t).pow(gamma);
  if (alpha >= 0)
    loss = loss * (alpha * targets + (1 - alpha) * (1 - targets));
  return loss.sum();
}

RpnOutput RetinaNetStage::Run(MaskRcnnImpl& net, const ImageBatch& batch,
                              const FeatureStageOutput& stage,
                              const std::vector<ImageTarget>* targets) {
  const ModelConfig& c = net.config_;
  RetinaNetHead& head = *net.retinanet_head_;
  const int64_t num_classes = head.NumClasses();
  const std::vector<at::Tensor>& features = stage.features;
  std::vector<std::array<int64_t, 2>> sizes;
  std::vector<at::Tensor> logits, deltas;
  std::vector<int64_t> per_level;
  for (size_t l = 0; l < features.size(); ++l) {
    sizes.push_back({features[l].size(-2), features[l].size(-1)});
    logits.push_back(PermuteToNHwaK(stage.rpn_logits[l].to(torch::kFloat), num_classes));
    deltas.push_back(PermuteToNHwaK(stage.rpn_deltas[l].to(torch::kFloat), 4));
    per_level.push_back(logits.back().size(1));
  }
  std::vector<std::vector<double>> ratios = c.anchor_aspect_ratios;
  if (ratios.size() == 1)
    ratios.assign(c.anchor_sizes.size(), ratios.front());
  const at::Tensor anchors = Detectron2Anchors(sizes, c.FeatureStrides(), c.anchor_sizes, ratios,
                                               c.anchor_offset, batch.tensors.device());
  const std::array<double, 4>& weights = c.retinanet_bbox_reg_weights;
  RpnOutput out;
  const int64_t num_images = batch.tensors.size(0);
  if (net.is_training()) {
    TORCH_CHECK(targets != nullptr, "RetinaNet: training mode needs targets");
    const at::Tensor all_logits = torch::cat(logits, 1);  // N x R x K
    const at::Tensor all_deltas = torch::cat(deltas, 1);  // N x R x 4
    std::vector<at::Tensor> labels, target_deltas;
    for (int64_t i = 0; i < num_images; ++i) {
      const ImageTarget& t = (*targets)[static_cast<size_t>(i)];
      const at::Tensor gt = t.boxes.to(anchors.dtype());
      // labels: 1..K foreground class, 0 background, -1 ignored (between the thresholds).
      const Assignment a = Assign(gt, t.labels, anchors, c.retinanet_iou_thresholds[1],
                                  c.retinanet_iou_thresholds[0], /*allow_low_quality=*/true);
      const at::Tensor matched =
          gt.numel() == 0 ? torch::zeros_like(anchors) : gt.index_select(0, a.matched);
      labels.push_back(a.labels);
      target_deltas.push_back(kernels::EncodeBoxes(matched, anchors, weights));
    }
    const at::Tensor gt_labels = torch::stack(labels);  // N x R
    const at::Tensor valid = gt_labels.ge(0);
    const at::Tensor foreground = gt_labels.gt(0);
    // One-hot over the K classes (background: all zeros); ignored anchors add nothing.
    const at::Tensor one_hot = F::one_hot(gt_labels.clamp_min(0), num_classes + 1)
                                   .narrow(-1, 1, num_classes)
                                   .to(torch::kFloat);
    const at::Tensor focal_terms =
        at::where(valid.unsqueeze(-1), all_logits, at::full({}, -1e4, all_logits.options()));
    // An ignored anchor's logits are pushed to -1e4 with target 0: its focal term is 0 up to
    // float rounding (e^-1e4), and its gradient is cut by where().
    const at::Tensor loss_cls =
        SigmoidFocalLossSum(focal_terms, one_hot * valid.unsqueeze(-1),
                            c.retinanet_focal_loss_alpha, c.retinanet_focal_loss_gamma);
    const at::Tensor fg = foreground.unsqueeze(-1);
    const at::Tensor loss_box =
        SmoothL1Sum(at::where(fg, all_deltas, 0), at::where(fg, torch::stack(target_deltas), 0),
                    c.retinanet_smooth_l1_beta);
    at::Tensor& normalizer = head.loss_normalizer();
    const at::Tensor count = foreground.sum().to(torch::kFloat).clamp_min(1);
    normalizer = (normalizer.defined() ? normalizer.to(count.device())
                                       : at::full({}, 100.0, count.options())) *
                     0.9 +
                 count * 0.1;
    normalizer = normalizer.detach();
    out.losses["loss_cls"] = loss_cls / normalizer;
    out.losses["loss_box_reg"] = loss_box / normalizer;
    return out;
  }
  const DetectionSettings& settings = net.settings_;
  std::vector<int64_t> level_start(per_level.size() + 1, 0);
  for (size_t l = 0; l < per_level.size(); ++l)
    level_start[l + 1] = level_start[l] + per_level[l];
  for (int64_t i = 0; i < num_images; ++i) {
    std::vector<at::Tensor> boxes, scores, classes;
    for (size_t l = 0; l < logits.size(); ++l) {
      const at::Tensor level_scores = logits[l][i].sigmoid();  // HWA x K
      const at::Tensor flat = level_scores.flatten();
      const at::Tensor keep = torch::nonzero(flat > settings.score_thresh).squeeze(1);
      const at::Tensor kept_scores = flat.index_select(0, keep);
      const int64_t k = std::min<int64_t>(kept_scores.size(0), c.retinanet_topk_candidates_test);
      const auto [top_scores, order] = kept_scores.topk(k);
      const at::Tensor index = keep.index_select(0, order);
      const at::Tensor anchor_index = index.div(num_classes, "floor");
      const at::Tensor class_index = index.remainder(num_classes);
      const at::Tensor level_anchors = anchors.narrow(0, level_start[l], per_level[l]);
      boxes.push_back(kernels::DecodeBoxes(deltas[l][i].index_select(0, anchor_index),
                                           level_anchors.index_select(0, anchor_index), weights));
      scores.push_back(top_scores);
      classes.push_back(class_index);
    }
    ImageResult r;
    const at::Tensor all_boxes = torch::cat(boxes), all_scores = torch::cat(scores);
    const at::Tensor all_classes = torch::cat(classes);
    at::Tensor kept =
        kernels::BatchedNms(all_boxes, all_scores, all_classes, c.retinanet_nms_thresh_test);
    kept = kept.narrow(0, 0, std::min<int64_t>(kept.size(0), settings.detections_per_image));
    r.boxes = all_boxes.index_select(0, kept);
    r.scores = all_scores.index_select(0, kept);
    r.labels = all_classes.index_select(0, kept) + 1;  // contiguous 1..K
    out.detections.push_back(std::move(r));
    out.proposals.push_back(torch::zeros({0, 4}, anchors.options()));
    out.scores.push_back(torch::zeros({0}, anchors.options()));
  }
  return out;
}

void RetinaNetStage::HeadOutputs(MaskRcnnImpl& net, FeatureStageOutput& stage) {
  std::tie(stage.rpn_logits, stage.rpn_deltas) = net.retinanet_head_->Forward(stage.features);
}

// Called by MaskRcnnImpl::FeatureStage and ::Rpn (the top and the rpn room do not include
// this room).
void RetinaNetHeadOutputs(MaskRcnnImpl& net, FeatureStageOutput& stage) {
  RetinaNetStage::HeadOutputs(net, stage);
}

// Called by MaskRcnnImpl::Rpn (the rpn room does not include this one).
RpnOutput RetinaNetOutputs(MaskRcnnImpl& net, const ImageBatch& batch,
                           const FeatureStageOutput& stage,
                           const std::vector<ImageTarget>* targets) {
  return RetinaNetStage::Run(net, batch, stage, targets);
}

}  // namespace mrcnn::model
