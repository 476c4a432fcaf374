// RetinaNet's parts, anchors, losses and detections (retinanet.h).
#include "trainer/model/meta_arch/retinanet.h"

#include <torch/torch.h>

#include "kernels/ops.h"
#include "trainer/model/anchor_generator.h"
#include "trainer/model/backbone/backbone.h"
#include "trainer/model/box_losses.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/meta_arch/retinanet_head.h"
#include "trainer/model/registry.h"

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

RetinaNet::RetinaNet(const ModelConfig& config) : MetaArchitecture(config) {
  detection_settings().score_thresh = config_.retinanet_score_thresh_test;
  detection_settings().masks = false;
  head_ = register_module("head", std::make_shared<RetinaNetHead>(config_));
}

FeatureStageOutput RetinaNet::FeatureStage(const at::Tensor& batch) {
  FeatureStageOutput out;
  out.features = Features(batch);
  std::tie(out.head_logits, out.head_deltas) = head_->Forward(out.features);
  return out;
}

std::vector<at::Tensor> RetinaNet::FeatureStageParameters() const {
  std::vector<at::Tensor> out;
  for (const auto& module : {static_cast<const torch::nn::Module*>(&backbone()),
                             static_cast<const torch::nn::Module*>(head_.get())}) {
    for (const at::Tensor& p : module->parameters())
      if (p.requires_grad())
        out.push_back(p);
  }
  return out;
}

ModelOutput RetinaNet::Heads(const ImageBatch& batch, const FeatureStageOutput& stage,
                             const std::vector<ImageTarget>* targets) {
  const ModelConfig& c = config_;
  const int64_t num_classes = head_->NumClasses();
  const std::vector<at::Tensor>& features = stage.features;
  std::vector<std::array<int64_t, 2>> sizes;
  std::vector<at::Tensor> logits, deltas;
  std::vector<int64_t> per_level;
  for (size_t l = 0; l < features.size(); ++l) {
    sizes.push_back({features[l].size(-2), features[l].size(-1)});
    logits.push_back(PermuteToNHwaK(stage.head_logits[l].to(torch::kFloat), num_classes));
    deltas.push_back(PermuteToNHwaK(stage.head_deltas[l].to(torch::kFloat), 4));
    per_level.push_back(logits.back().size(1));
  }
  std::vector<std::vector<double>> ratios = c.anchor_aspect_ratios;
  if (ratios.size() == 1)
    ratios.assign(c.anchor_sizes.size(), ratios.front());
  const at::Tensor anchors = Detectron2Anchors(sizes, c.FeatureStrides(), c.anchor_sizes, ratios,
                                               c.anchor_offset, batch.tensors.device());
  ModelOutput out;
  if (is_training()) {
    TORCH_CHECK(targets != nullptr, "RetinaNet: training mode needs targets");
    out.losses = Losses(anchors, logits, deltas, *targets);
    return out;
  }
  for (int64_t i = 0; i < batch.tensors.size(0); ++i)
    out.images.push_back(ImageOutput{Detect(anchors, logits, deltas, per_level, i)});
  return out;
}

std::map<std::string, at::Tensor> RetinaNet::Losses(const at::Tensor& anchors,
                                                    const std::vector<at::Tensor>& logits,
                                                    const std::vector<at::Tensor>& deltas,
                                                    const std::vector<ImageTarget>& targets) {
  const ModelConfig& c = config_;
  const int64_t num_classes = head_->NumClasses();
  const std::array<double, 4>& weights = c.retinanet_bbox_reg_weights;
  const auto num_images = static_cast<int64_t>(targets.size());
  std::map<std::string, at::Tensor> losses;
  const at::Tensor all_logits = torch::cat(logits, 1);  // N x R x K
  const at::Tensor all_deltas = torch::cat(deltas, 1);  // N x R x 4
  std::vector<at::Tensor> labels, target_deltas;
  for (int64_t i = 0; i < num_images; ++i) {
    const ImageTarget& t = targets[static_cast<size_t>(i)];
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
      SigmoidFocalLossSum(focal_terms, one_hot * valid.unsqueeze(-1), c.retinanet_focal_loss_alpha,
                          c.retinanet_focal_loss_gamma);
  const at::Tensor fg = foreground.unsqueeze(-1);
  const at::Tensor loss_box =
      SmoothL1Sum(at::where(fg, all_deltas, 0), at::where(fg, torch::stack(target_deltas), 0),
                  c.retinanet_smooth_l1_beta);
  at::Tensor& normalizer = head_->loss_normalizer();
  const at::Tensor count = foreground.sum().to(torch::kFloat).clamp_min(1);
  normalizer = (normalizer.defined() ? normalizer.to(count.device())
                                     : at::full({}, 100.0, count.options())) *
                   0.9 +
               count * 0.1;
  normalizer = normalizer.detach();
  losses["loss_cls"] = loss_cls / normalizer;
  losses["loss_box_reg"] = loss_box / normalizer;
  return losses;
}

ImageResult RetinaNet::Detect(const at::Tensor& anchors, const std::vector<at::Tensor>& logits,
                              const std::vector<at::Tensor>& deltas,
                              const std::vector<int64_t>& per_level, int64_t i) const {
  const ModelConfig& c = config_;
  const DetectionSettings& settings = forward_context().settings;
  const int64_t num_classes = head_->NumClasses();
  const std::array<double, 4>& weights = c.retinanet_bbox_reg_weights;
  std::vector<int64_t> level_start(per_level.size() + 1, 0);
  for (size_t l = 0; l < per_level.size(); ++l)
    level_start[l + 1] = level_start[l] + per_level[l];
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
  return r;
}

void RegisterRetinaNet(Registry<MetaArchitecture>& registry) {
  registry.Add("RetinaNet", [](const ModelConfig& c) { return std::make_shared<RetinaNet>(c); });
}

}  // namespace mrcnn::model
