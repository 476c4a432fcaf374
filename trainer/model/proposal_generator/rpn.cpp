// The region proposal network (torchvision's RegionProposalNetwork, Detectron2's RPN):
// anchors, the proposals kept per image (filter_proposals), and in training the anchors'
// sampling and losses. Registered as MODEL.PROPOSAL_GENERATOR.NAME "RPN".
#include "trainer/model/proposal_generator/rpn.h"

#include <torch/torch.h>

#include <limits>
#include <tuple>

#include "kernels/ops.h"
#include "trainer/model/anchor_generator.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace F = torch::nn::functional;

namespace {

// Eval mode: per image, the top-scored boxes clipped, small and low-scoring ones dropped, NMS
// per level, the best post_nms (torchvision's filter_proposals as it reads).
void KeepEvalProposals(const ModelConfig& config, const ImageBatch& batch,
                       const at::Tensor& proposals, const at::Tensor& scores_all,
                       const at::Tensor& top, const at::Tensor& levels, int64_t post_nms,
                       RpnOutput& out) {
  const int64_t num_images = proposals.size(0);
  for (int64_t i = 0; i < num_images; ++i) {
    at::Tensor boxes = proposals[i].index_select(0, top[i]);
    at::Tensor scores = torch::sigmoid(scores_all[i].index_select(0, top[i]));
    at::Tensor lvl = levels;
    boxes = ClipBoxes(boxes, batch.image_sizes[static_cast<size_t>(i)][0],
                      batch.image_sizes[static_cast<size_t>(i)][1]);
    at::Tensor keep = KeepNonSmall(boxes, config.rpn_min_size, config.detectron2());
    boxes = boxes.index_select(0, keep);
    scores = scores.index_select(0, keep);
    lvl = lvl.index_select(0, keep);
    keep = torch::where(scores.ge(config.rpn_score_thresh))[0];
    boxes = boxes.index_select(0, keep);
    scores = scores.index_select(0, keep);
    lvl = lvl.index_select(0, keep);
    keep = kernels::BatchedNms(boxes, scores, lvl, config.rpn_nms_thresh);
    keep = keep.narrow(0, 0, std::min<int64_t>(post_nms, keep.size(0)));
    out.proposals.push_back(boxes.index_select(0, keep));
    out.scores.push_back(scores.index_select(0, keep));
  }
}

}  // namespace

Rpn::Rpn(const ModelConfig& config, SharedContext context)
    : config_(config), context_(std::move(context)) {
  box_loss_ = ParseBoxRegLoss(config_.rpn_bbox_reg_loss_type, "MODEL.RPN.BBOX_REG_LOSS_TYPE");
  head_ = register_module("head", RpnHeadRegistry().Create(config_.rpn_head, config_));
}

void Rpn::HeadOutputs(FeatureStageOutput& stage) {
  std::tie(stage.head_logits, stage.head_deltas) = head_->Forward(stage.features);
}

std::vector<at::Tensor> Rpn::HeadParameters() const {
  return head_->parameters();
}

// torchvision's RPN filter_proposals: per image, the top pre-NMS-N anchors of each level by
// objectness, clipped, small and low-scoring boxes dropped, NMS per level, the best post-NMS-N.
void Rpn::FilterProposals(const ImageBatch& batch, const at::Tensor& proposals,
                          const at::Tensor& objectness, const std::vector<int64_t>& per_level,
                          RpnOutput& out) const {
  const bool training = is_training();
  const int64_t pre_nms =
      training ? config_.rpn_pre_nms_top_n_train : config_.rpn_pre_nms_top_n_test;
  const int64_t post_nms =
      training ? config_.rpn_post_nms_top_n_train : config_.rpn_post_nms_top_n_test;
  const int64_t num_images = proposals.size(0);
  at::Tensor scores_all = objectness.detach().reshape({num_images, -1});
  std::vector<at::Tensor> top_idx, level_ids;
  std::vector<int64_t> level_sizes;  // columns of each level in `top`, in order
  int64_t offset = 0;
  for (size_t l = 0; l < per_level.size(); ++l) {
    at::Tensor ob = scores_all.narrow(1, offset, per_level[l]);
    const int64_t k = std::min(pre_nms, per_level[l]);
    level_sizes.push_back(k);
    top_idx.push_back(std::get<1>(ob.topk(k, 1)) + offset);
    level_ids.push_back(
        torch::full({k}, static_cast<int64_t>(l), scores_all.options().dtype(torch::kLong)));
    offset += per_level[l];
  }
  at::Tensor top = torch::cat(top_idx, 1);
  at::Tensor levels = torch::cat(level_ids, 0);
  if (training) {
    // The same proposals without data-dependent sizes: small or low-scoring boxes are
    // unusable, so they suppress no real box (as they did not when they were dropped first);
    // the kept ones, by score, fill a fixed number of rows, the rest is padding (out.valid
    // false).
    if (num_images == 0) {
      return;
    }
    std::vector<at::Tensor> boxes_of, scores_of, usable_of;
    for (int64_t i = 0; i < num_images; ++i) {
      at::Tensor boxes = ClipBoxes(proposals[i].index_select(0, top[i]),
                                   batch.image_sizes[static_cast<size_t>(i)][0],
                                   batch.image_sizes[static_cast<size_t>(i)][1]);
      const at::Tensor ws = boxes.select(1, 2) - boxes.select(1, 0);
      const at::Tensor hs = boxes.select(1, 3) - boxes.select(1, 1);
      scores_of.push_back(torch::sigmoid(scores_all[i].index_select(0, top[i])));
      // Detectron2 keeps boxes strictly larger than its MIN_SIZE (0: non-empty ones).
      const bool strictly = config_.detectron2();
      usable_of.push_back(
          (strictly ? ws.gt(config_.rpn_min_size) : ws.ge(config_.rpn_min_size))
              .logical_and(strictly ? hs.gt(config_.rpn_min_size) : hs.ge(config_.rpn_min_size))
              .logical_and(scores_of.back().ge(config_.rpn_score_thresh)));
      boxes_of.push_back(std::move(boxes));
    }
    const at::Tensor scores = torch::stack(scores_of);
    at::Tensor kept;
    if (levels.size(0) > kernels::kBatchedNmsPerClassAbove) {
      // torchvision's per-class NMS (its algorithm at this size) with the levels as classes:
      // every image's levels in one call (on CUDA: two launches for the whole batch).
      kept = kernels::NmsKeepMaskGrouped(torch::stack(boxes_of), scores, torch::stack(usable_of),
                                         level_sizes, config_.rpn_nms_thresh);
    } else {
      // Few boxes: torchvision's coordinate trick, with the unusable boxes on a level of their
      // own, image by image.
      std::vector<at::Tensor> kept_of;
      const int64_t dropped_level = static_cast<int64_t>(per_level.size());
      for (int64_t i = 0; i < num_images; ++i) {
        const at::Tensor lvl = at::where(usable_of[i], levels, dropped_level);
        kept_of.push_back(
            kernels::BatchedNmsKeepMask(boxes_of[i], scores_of[i], lvl, config_.rpn_nms_thresh)
                .logical_and(usable_of[i]));
      }
      kept = torch::stack(kept_of);
    }
    const at::Tensor ranked = at::where(
        kept, scores, at::full({}, -std::numeric_limits<float>::infinity(), scores.options()));
    const int64_t rows = std::min<int64_t>(post_nms, levels.size(0));
    // A stable sort rather than topk: equal scores keep their order (lower index first),
    // whatever the device. One sort for the batch.
    auto [sorted, order_all] = ranked.sort(/*stable=*/true, 1, /*descending=*/true);
    const at::Tensor best = sorted.narrow(1, 0, rows), order = order_all.narrow(1, 0, rows);
    for (int64_t i = 0; i < num_images; ++i) {
      out.proposals.push_back(boxes_of[i].index_select(0, order[i]));
      out.scores.push_back(scores_of[i].index_select(0, order[i]));
      out.valid.push_back(best[i].isfinite());
    }
    return;
  }
  KeepEvalProposals(config_, batch, proposals, scores_all, top, levels, post_nms, out);
}

RpnOutput Rpn::Forward(const ImageBatch& batch, const FeatureStageOutput& stage,
                       const std::vector<ImageTarget>* targets) {
  const std::vector<at::Tensor>& features = stage.features;
  const std::vector<at::Tensor>& logits = stage.head_logits;
  const std::vector<at::Tensor>& deltas = stage.head_deltas;
  const int64_t num_images = batch.tensors.size(0);
  const int64_t image_h = batch.tensors.size(-2), image_w = batch.tensors.size(-1);
  std::vector<std::array<int64_t, 2>> sizes, strides;
  std::vector<int64_t> per_level;
  std::vector<at::Tensor> flat_logits, flat_deltas;
  for (size_t l = 0; l < features.size(); ++l) {
    const int64_t fh = features[l].size(-2), fw = features[l].size(-1);
    sizes.push_back({fh, fw});
    strides.push_back({image_h / fh, image_w / fw});
    per_level.push_back(logits[l].size(1) * fh * fw);
    flat_logits.push_back(PermuteToNHwaK(logits[l].to(torch::kFloat), 1));
    flat_deltas.push_back(PermuteToNHwaK(deltas[l].to(torch::kFloat), 4));
  }
  std::vector<std::vector<double>> ratios = config_.anchor_aspect_ratios;
  if (ratios.size() == 1)
    ratios.assign(config_.anchor_sizes.size(), ratios.front());
  std::vector<std::vector<double>> anchor_sizes = config_.anchor_sizes;
  if (anchor_sizes.size() == 1)
    anchor_sizes.assign(features.size(), anchor_sizes.front());
  if (ratios.size() == 1)
    ratios.assign(features.size(), ratios.front());
  at::Tensor anchors =
      config_.detectron2()
          ? Detectron2Anchors(sizes, config_.FeatureStrides(), anchor_sizes, ratios,
                              config_.anchor_offset, batch.tensors.device())
          : kernels::GenerateAnchors(sizes, strides, anchor_sizes, ratios, batch.tensors.device());
  at::Tensor objectness = torch::cat(flat_logits, 1).flatten(0, -2);  // (N*A_total, 1)
  at::Tensor pred_deltas = torch::cat(flat_deltas, 1).reshape({-1, 4});
  at::Tensor all_anchors = anchors.repeat({num_images, 1});
  at::Tensor proposals =
      kernels::DecodeBoxes(pred_deltas.detach(), all_anchors, {1.0, 1.0, 1.0, 1.0})
          .view({num_images, -1, 4});

  RpnOutput out;
  FilterProposals(batch, proposals, objectness, per_level, out);
  const bool training = is_training();

  if (training) {
    TORCH_CHECK(targets != nullptr, "RPN: training mode needs targets");
    std::vector<at::Tensor> labels, regression_targets, matched_boxes, pos_masks, neg_masks;
    for (int64_t i = 0; i < num_images; ++i) {
      const ImageTarget& t = (*targets)[static_cast<size_t>(i)];
      const at::Tensor gt = t.boxes.to(anchors.dtype());
      Assignment a = Assign(gt, torch::ones({gt.size(0)}, anchors.options().dtype(torch::kLong)),
                            anchors, config_.rpn_fg_iou_thresh, config_.rpn_bg_iou_thresh, true);
      at::Tensor matched_gt =
          gt.numel() == 0 ? torch::zeros_like(anchors) : gt.index_select(0, a.matched);
      labels.push_back(a.labels.to(torch::kFloat));
      regression_targets.push_back(kernels::EncodeBoxes(matched_gt, anchors, {1.0, 1.0, 1.0, 1.0}));
      matched_boxes.push_back(matched_gt);
      auto [pos, neg] = kernels::SampleBalanced(
          a.labels, config_.rpn_batch_size_per_image, config_.rpn_positive_fraction,
          context_->SamplingGenerator(static_cast<size_t>(i)));
      pos_masks.push_back(pos);
      neg_masks.push_back(neg);
    }
    // Over every anchor, the unsampled ones masked out: the sampled set's size is only known
    // on the device, and selecting it (nonzero) would make the host wait. Same sums as over
    // the selected anchors, in another order.
    const at::Tensor pos = torch::cat(pos_masks);
    const at::Tensor sampled = pos.logical_or(torch::cat(neg_masks));
    // torchvision divides by the anchors actually sampled; Detectron2 by the constant
    // BATCH_SIZE_PER_IMAGE x images (the same whenever an image has enough anchors to fill
    // its quota, which is almost always).
    const at::Tensor normaliser =
        config_.detectron2()
            ? at::full({}, static_cast<double>(config_.rpn_batch_size_per_image * num_images),
                       objectness.options())
            : sampled.sum().to(torch::kFloat);
    at::Tensor box_loss =
        BoxRegressionLossSumWhere(box_loss_, pred_deltas, torch::cat(regression_targets),
                                  all_anchors, torch::cat(matched_boxes), {1.0, 1.0, 1.0, 1.0}, pos,
                                  config_.rpn_smooth_l1_beta) *
        (config_.rpn_bbox_reg_loss_weight * config_.rpn_loss_weight) / normaliser;
    const at::Tensor bce = F::binary_cross_entropy_with_logits(
        objectness.flatten(), torch::cat(labels).clamp_min(0),
        F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
    at::Tensor obj_loss = at::where(sampled, bce, at::zeros({}, bce.options())).sum() *
                          config_.rpn_loss_weight / normaliser;
    out.losses["loss_objectness"] = obj_loss;
    out.losses["loss_rpn_box_reg"] = box_loss;
  }
  return out;
}

void RegisterRpn(Registry<ProposalGenerator, SharedContext>& registry) {
  registry.Add("RPN", [](const ModelConfig& c, SharedContext context) {
    return std::make_shared<Rpn>(c, std::move(context));
  });
}

Registry<ProposalGenerator, SharedContext>& ProposalGeneratorRegistry() {
  static Registry<ProposalGenerator, SharedContext> registry("proposal generator",
                                                             "MODEL.PROPOSAL_GENERATOR.NAME");
  static bool populated = [] {
    RegisterRpn(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
