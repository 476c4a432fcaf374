// Cascade R-CNN's box stages: per-stage matching, losses and the refined detections
// (Detectron2's CascadeROIHeads, cascade_rcnn.py).
#include "trainer/model/roi_heads/cascade_roi_heads.h"

#include <torch/torch.h>

#include "kernels/ops.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace {

// Forward unchanged, gradient times `scale` (Detectron2's _ScaleGradient): x's value plus a
// term that is exactly 0 forwards and carries scale x the gradient backwards.
at::Tensor ScaleGradient(const at::Tensor& x, double scale) {
  const at::Tensor fixed = x.detach();
  return fixed + (x - fixed) * scale;
}

std::vector<at::Tensor> SplitClipped(const at::Tensor& boxes, const std::vector<int64_t>& per_image,
                                     const std::vector<std::array<int64_t, 2>>& image_sizes) {
  std::vector<at::Tensor> out;
  auto parts = boxes.split_with_sizes(per_image, 0);
  for (size_t i = 0; i < parts.size(); ++i)
    out.push_back(ClipBoxes(parts[i], image_sizes[i][0], image_sizes[i][1]));
  return out;
}

}  // namespace

CascadeRoiHeads::CascadeRoiHeads(const ModelConfig& config, SharedContext context)
    : StandardRoiHeads(config, std::move(context), BoxHeadOnly{}) {
  // Stage 0 is the standard head; stage s > 0 at roi_heads.cascade.{s}.
  auto cascade = register_module("cascade", std::make_shared<torch::nn::Module>("Cascade"));
  for (size_t s = 1; s < config_.cascade_ious.size(); ++s) {
    auto stage = cascade->register_module(std::to_string(s),
                                          std::make_shared<torch::nn::Module>("CascadeStage"));
    stage_heads_.push_back(
        stage->register_module("box_head", BoxHeadRegistry().Create(config_.box_head, config_)));
    stage_predictors_.push_back(stage->register_module(
        "box_predictor",
        std::make_shared<FastRcnnPredictor>(stage_heads_.back()->RepresentationSize(),
                                            config_.num_classes + 1, true)));
  }
  if (config_.mask_on)
    RegisterMaskHead(MaskHeadRegistry().Create(config_.mask_head, config_), true);
  if (config_.keypoint_on)
    RegisterKeypointHead();
}

std::pair<BoxHead*, FastRcnnPredictor*> CascadeRoiHeads::Stage(size_t s) const {
  if (s == 0)
    return {box_head_.get(), box_predictor_.get()};
  return {stage_heads_.at(s - 1).get(), stage_predictors_.at(s - 1).get()};
}

std::map<std::string, at::Tensor> CascadeRoiHeads::BoxLosses(
    const BoxPooler& pool, const RoiSamples& samples, const std::vector<ImageTarget>& targets,
    const std::vector<std::array<int64_t, 2>>& image_sizes) {
  const ModelConfig& config = config_;
  const size_t num_stages = config.cascade_ious.size();
  const size_t num_images = samples.proposals.size();
  std::vector<int64_t> per_image;
  for (const at::Tensor& p : samples.proposals)
    per_image.push_back(p.size(0));

  std::vector<at::Tensor> proposals = samples.proposals;
  at::Tensor labels = torch::cat(samples.labels);
  at::Tensor matched_boxes = torch::cat(samples.matched_boxes);
  at::Tensor valid = torch::cat(samples.valid);
  std::map<std::string, at::Tensor> losses;
  for (size_t s = 0; s < num_stages; ++s) {
    const std::array<double, 4>& weights = config.cascade_bbox_reg_weights[s];
    if (s > 0) {
      // Every box of the previous stage, matched at this stage's IoU: label 0 below it.
      std::vector<at::Tensor> stage_labels, stage_matched;
      for (size_t i = 0; i < num_images; ++i) {
        const at::Tensor gt = targets[i].boxes.to(proposals[i].dtype());
        const Assignment a = Assign(gt, targets[i].labels, proposals[i], config.cascade_ious[s],
                                    config.cascade_ious[s], false);
        const at::Tensor gt_or_zero = gt.numel() == 0 ? torch::zeros({1, 4}, gt.options()) : gt;
        stage_labels.push_back(a.labels);
        stage_matched.push_back(gt_or_zero.index_select(0, a.matched));
      }
      const at::Tensor boxes = torch::cat(proposals);
      // Detectron2 drops the boxes clipping left empty (Boxes.nonempty) from this stage.
      const at::Tensor widths = boxes.select(1, 2) - boxes.select(1, 0);
      const at::Tensor heights = boxes.select(1, 3) - boxes.select(1, 1);
      valid = valid.logical_and(widths.gt(0)).logical_and(heights.gt(0));
      labels = torch::cat(stage_labels).masked_fill_(valid.logical_not(), 0);
      matched_boxes = torch::cat(stage_matched);
    }
    const at::Tensor all_proposals = torch::cat(proposals);
    context_->Phase("roi_maps");
    const at::Tensor pooled = ScaleGradient(pool(proposals), 1.0 / static_cast<double>(num_stages));
    context_->Phase("box_pool");
    auto [head, predictor] = Stage(s);
    auto [logits_raw, deltas_raw] = predictor->Forward(head->Forward(pooled));
    context_->Phase("box_head");
    const at::Tensor logits = logits_raw.to(torch::kFloat);
    const at::Tensor deltas = deltas_raw.to(torch::kFloat);

    const std::string suffix = "_stage" + std::to_string(s);
    std::tie(losses["loss_cls" + suffix], losses["loss_box_reg" + suffix]) = BoxHeadLosses(
        logits, deltas, labels, valid, kernels::EncodeBoxes(matched_boxes, all_proposals, weights),
        all_proposals, matched_boxes, weights);
    if (s + 1 < num_stages) {
      // The next stage's proposals: this stage's boxes, without gradient, clipped.
      const at::Tensor next =
          kernels::DecodeBoxes(deltas.detach(), all_proposals.detach(), weights);
      proposals = SplitClipped(next, per_image, image_sizes);
    }
  }
  return losses;
}

std::vector<ImageResult> CascadeRoiHeads::BoxDetections(
    const BoxPooler& pool, const std::vector<at::Tensor>& proposals_in,
    const std::vector<std::array<int64_t, 2>>& image_sizes) {
  const ModelConfig& config = config_;
  const size_t num_stages = config.cascade_ious.size();
  std::vector<int64_t> per_image;
  for (const at::Tensor& p : proposals_in)
    per_image.push_back(p.size(0));
  std::vector<at::Tensor> proposals = proposals_in;
  at::Tensor score_sum;
  at::Tensor boxes;
  for (size_t s = 0; s < num_stages; ++s) {
    if (s > 0) {
      // Empty boxes stay: every stage scores the same rows, whose scores are averaged.
      proposals = SplitClipped(boxes, per_image, image_sizes);
    }
    context_->Phase("roi_maps");
    const at::Tensor pooled = pool(proposals);
    context_->Phase("box_pool");
    auto [head, predictor] = Stage(s);
    auto [logits_raw, deltas_raw] = predictor->Forward(head->Forward(pooled));
    context_->Phase("box_head");
    const at::Tensor scores = torch::softmax(logits_raw.to(torch::kFloat), -1);
    score_sum = s == 0 ? scores : score_sum + scores;
    boxes = kernels::DecodeBoxes(deltas_raw.to(torch::kFloat), torch::cat(proposals),
                                 config.cascade_bbox_reg_weights[s]);
  }
  // Detectron2 sums the stages' scores, then multiplies by 1 / num_stages.
  const at::Tensor scores = score_sum * (1.0 / static_cast<double>(num_stages));
  const int64_t num_classes = scores.size(-1);
  auto boxes_split = boxes.split_with_sizes(per_image, 0);
  auto scores_split = scores.split_with_sizes(per_image, 0);
  std::vector<ImageResult> detections;
  for (size_t i = 0; i < proposals.size(); ++i) {
    // One box per RoI, the same for every class (SelectDetections takes R x K x 4).
    const at::Tensor clipped = ClipBoxes(boxes_split[i], image_sizes[i][0], image_sizes[i][1]);
    detections.push_back(SelectDetections(
        clipped.unsqueeze(1).expand({clipped.size(0), num_classes, 4}), scores_split[i]));
  }
  return detections;
}

void RegisterCascadeRoiHeads(Registry<RoiHeads, SharedContext>& registry) {
  registry.Add("CascadeROIHeads", [](const ModelConfig& c, SharedContext context) {
    return std::make_shared<CascadeRoiHeads>(c, std::move(context));
  });
}

}  // namespace mrcnn::model
