// Mask R-CNN forward passes. Every step mirrors torchvision 0.26
// (GeneralizedRCNNTransform, RegionProposalNetwork, RoIHeads, MultiScaleRoIAlign); the
// box-level operations are the mrcnn::kernels ops.
#include "trainer/model/mask_rcnn.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/ops.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace {

namespace F = torch::nn::functional;

at::Tensor ClipBoxes(const at::Tensor& boxes, int64_t height, int64_t width) {
  auto x = boxes.select(-1, 0).clamp(0, width);
  auto y = boxes.select(-1, 1).clamp(0, height);
  auto x2 = boxes.select(-1, 2).clamp(0, width);
  auto y2 = boxes.select(-1, 3).clamp(0, height);
  return torch::stack({x, y, x2, y2}, -1);
}

at::Tensor KeepNonSmall(const at::Tensor& boxes, double min_size) {
  auto ws = boxes.select(1, 2) - boxes.select(1, 0);
  auto hs = boxes.select(1, 3) - boxes.select(1, 1);
  return torch::where(ws.ge(min_size).logical_and(hs.ge(min_size)))[0];
}

// (N, A*C, H, W) -> (N, H*W*A, C), torchvision's permute_and_flatten.
at::Tensor PermuteAndFlatten(const at::Tensor& x, int64_t c) {
  const int64_t n = x.size(0), h = x.size(2), w = x.size(3);
  const int64_t a = x.size(1) / c;
  return x.view({n, a, c, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, c});
}

// 2^round(log2(feature/image)), from the height, as torchvision's _infer_scale.
std::vector<double> PoolerScales(const std::vector<at::Tensor>& features,
                                 const std::vector<std::array<int64_t, 2>>& image_sizes) {
  int64_t max_h = 0;
  for (const auto& s : image_sizes)
    max_h = std::max(max_h, s[0]);
  std::vector<double> scales;
  for (const auto& f : features) {
    const float approx = static_cast<float>(f.size(-2)) / static_cast<float>(max_h);
    scales.push_back(std::pow(2.0, std::nearbyint(std::log2(approx))));
  }
  return scales;
}

at::Tensor ToRois(const std::vector<at::Tensor>& boxes) {
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < boxes.size(); ++i) {
    auto idx = torch::full({boxes[i].size(0), 1}, static_cast<double>(i), boxes[i].options());
    parts.push_back(torch::cat({idx, boxes[i]}, 1));
  }
  return torch::cat(parts, 0);
}

// Matcher-based labelling shared by RPN and ROI heads: labels are 1/gt label for
// matches, 0 below the low threshold, -1 between thresholds.
struct Assignment {
  at::Tensor matched;  // clamped gt index per prediction
  at::Tensor labels;   // int64
};

Assignment Assign(const at::Tensor& gt_boxes, const at::Tensor& gt_labels,
                  const at::Tensor& predictions, double high, double low, bool allow_low_quality) {
  const auto n = predictions.size(0);
  if (gt_boxes.numel() == 0) {
    auto zeros = torch::zeros({n}, predictions.options().dtype(torch::kLong));
    return {zeros, zeros.clone()};
  }
  at::Tensor iou = kernels::BoxIou(gt_boxes, predictions);
  at::Tensor matched = kernels::MatchProposals(iou, high, low, allow_low_quality);
  at::Tensor clamped = matched.clamp_min(0);
  at::Tensor labels = gt_labels.index({clamped}).to(torch::kLong);
  // masked_fill_ with a number: index_put_ with a boolean mask reads its value tensor to the
  // host (an .item() per call).
  labels.masked_fill_(matched.eq(-1), 0);
  labels.masked_fill_(matched.eq(-2), -1);
  return {clamped, labels};
}

}  // namespace

MaskRcnnImpl::MaskRcnnImpl(const ModelConfig& config) : config_(config) {
  config_.Validate("model config");
  rpn_box_loss_ = ParseBoxRegLoss(config_.rpn_bbox_reg_loss_type, "MODEL.RPN.BBOX_REG_LOSS_TYPE");
  box_loss_ = ParseBoxRegLoss(config_.bbox_reg_loss_type, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE");
  settings_.score_thresh = config_.box_score_thresh;
  settings_.detections_per_image = config_.detections_per_image;
  settings_.masks = config_.mask_on;

  auto backbone = register_module("backbone", std::make_shared<torch::nn::Module>("Backbone"));
  body_ = backbone->register_module("body", BackboneRegistry().Create(config_.backbone, config_));
  neck_ = backbone->register_module("fpn", NeckRegistry().Create(config_.neck, config_));
  FreezeBackboneLayers(*body_, config_.trainable_layers);

  auto rpn = register_module("rpn", std::make_shared<torch::nn::Module>("Rpn"));
  rpn_head_ = rpn->register_module("head", RpnHeadRegistry().Create(config_.rpn_head, config_));

  auto roi = register_module("roi_heads", std::make_shared<torch::nn::Module>("RoiHeads"));
  box_head_ = roi->register_module("box_head", BoxHeadRegistry().Create(config_.box_head, config_));
  box_predictor_ = roi->register_module(
      "box_predictor", std::make_shared<FastRcnnPredictor>(box_head_->RepresentationSize(),
                                                           config_.num_classes + 1));
  if (config_.mask_on) {
    mask_head_ =
        roi->register_module("mask_head", MaskHeadRegistry().Create(config_.mask_head, config_));
    mask_predictor_ = roi->register_module(
        "mask_predictor",
        std::make_shared<MaskRcnnPredictor>(mask_head_->OutChannels(), mask_head_->OutChannels(),
                                            config_.num_classes + 1));
  }
}

ImageBatch MaskRcnnImpl::Transform(const std::vector<at::Tensor>& images,
                                   std::vector<ImageTarget>* targets) {
  TORCH_CHECK(!images.empty(), "MaskRcnn: no images given");
  ImageBatch batch;
  std::vector<at::Tensor> resized;
  const auto& opts = images.front().options();
  std::vector<float> mean_v, std_v;
  for (int c = 0; c < 3; ++c) {
    mean_v.push_back(static_cast<float>(config_.pixel_mean[c] / 255.0));
    std_v.push_back(static_cast<float>(config_.pixel_std[c] / 255.0));
  }
  auto mean =
      torch::tensor(mean_v, torch::kFloat).to(opts.device()).to(opts.dtype()).view({3, 1, 1});
  auto stdv =
      torch::tensor(std_v, torch::kFloat).to(opts.device()).to(opts.dtype()).view({3, 1, 1});
  for (size_t i = 0; i < images.size(); ++i) {
    const at::Tensor& image = images[i];
    TORCH_CHECK(image.dim() == 3 && image.size(0) == 3, "MaskRcnn: image ", i,
                " must be 3 x H x W, got ", image.sizes());
    const int64_t h = image.size(1), w = image.size(2);
    batch.original_sizes.push_back({h, w});
    at::Tensor normalised = (image - mean) / stdv;
    int64_t min_size = config_.min_size_test;
    int64_t max_size = config_.max_size_test;
    if (is_training()) {
      const auto& choices = config_.min_size_train;
      min_size = choices[static_cast<size_t>(
          torch::randint(static_cast<int64_t>(choices.size()), {1}).item<int64_t>())];
      max_size = config_.max_size_train;
    }
    // Python's interpolate(scale_factor=s, recompute_scale_factor=True): size = floor(dim * s) in
    // double.
    const double scale =
        std::min(static_cast<double>(min_size) / static_cast<double>(std::min(h, w)),
                 static_cast<double>(max_size) / static_cast<double>(std::max(h, w)));
    const int64_t oh = static_cast<int64_t>(std::floor(static_cast<double>(h) * scale));
    const int64_t ow = static_cast<int64_t>(std::floor(static_cast<double>(w) * scale));
    at::Tensor out = at::upsample_bilinear2d(normalised.unsqueeze(0), {oh, ow}, false, std::nullopt,
                                             std::nullopt)[0];
    resized.push_back(out);
    batch.image_sizes.push_back({oh, ow});
    if (targets != nullptr) {
      ImageTarget& t = (*targets)[i];
      // resize_boxes: ratios new/old computed in float32.
      const float rh = static_cast<float>(oh) / static_cast<float>(h);
      const float rw = static_cast<float>(ow) / static_cast<float>(w);
      auto ratio = torch::tensor({rw, rh, rw, rh}, t.boxes.options().dtype(torch::kFloat))
                       .to(t.boxes.dtype());
      t.boxes = t.boxes * ratio;
      if (t.masks.defined() && t.masks.numel() > 0) {
        t.masks = at::upsample_nearest2d(t.masks.unsqueeze(1).to(torch::kFloat), {oh, ow},
                                         std::nullopt, std::nullopt)
                      .select(1, 0)
                      .to(torch::kByte);
      } else if (t.masks.defined()) {
        t.masks = torch::zeros({0, oh, ow}, t.masks.options());
      }
    }
  }
  int64_t max_h = 0, max_w = 0;
  for (const auto& s : batch.image_sizes) {
    max_h = std::max(max_h, s[0]);
    max_w = std::max(max_w, s[1]);
  }
  const double stride = config_.size_divisibility;
  max_h = static_cast<int64_t>(std::ceil(static_cast<double>(max_h) / stride) * stride);
  max_w = static_cast<int64_t>(std::ceil(static_cast<double>(max_w) / stride) * stride);
  batch.tensors = torch::zeros({static_cast<int64_t>(images.size()), 3, max_h, max_w},
                               resized.front().options());
  for (size_t i = 0; i < resized.size(); ++i) {
    using torch::indexing::Slice;
    batch.tensors[static_cast<int64_t>(i)]
        .index({Slice(), Slice(0, resized[i].size(1)), Slice(0, resized[i].size(2))})
        .copy_(resized[i]);
  }
  return batch;
}

std::vector<at::Tensor> MaskRcnnImpl::Features(const at::Tensor& batch) {
  // On CUDA the maps are channels-last from here on (convolutions, FPN, the RPN head, ROIAlign
  // and the mask head keep the layout): cuDNN's bf16/fp16 kernels work in NHWC and would
  // otherwise transform every planar input and output.
  std::vector<at::Tensor> body = body_->Forward(
      batch.is_cuda() && config_.channels_last ? batch.contiguous(at::MemoryFormat::ChannelsLast)
                                               : batch);
  Phase("backbone");
  std::vector<at::Tensor> pyramid = neck_->Forward(body);
  Phase("fpn");
  return pyramid;
}

// torchvision's RPN filter_proposals: per image, the top pre-NMS-N anchors of each level by
// objectness, clipped, small and low-scoring boxes dropped, NMS per level, the best post-NMS-N.
void MaskRcnnImpl::FilterProposals(const ImageBatch& batch, const at::Tensor& proposals,
                                   const at::Tensor& objectness,
                                   const std::vector<int64_t>& per_level, RpnOutput& out) const {
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
      usable_of.push_back(ws.ge(config_.rpn_min_size)
                              .logical_and(hs.ge(config_.rpn_min_size))
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
  for (int64_t i = 0; i < num_images; ++i) {
    at::Tensor boxes = proposals[i].index_select(0, top[i]);
    at::Tensor scores = torch::sigmoid(scores_all[i].index_select(0, top[i]));
    at::Tensor lvl = levels;
    boxes = ClipBoxes(boxes, batch.image_sizes[static_cast<size_t>(i)][0],
                      batch.image_sizes[static_cast<size_t>(i)][1]);
    at::Tensor keep = KeepNonSmall(boxes, config_.rpn_min_size);
    boxes = boxes.index_select(0, keep);
    scores = scores.index_select(0, keep);
    lvl = lvl.index_select(0, keep);
    keep = torch::where(scores.ge(config_.rpn_score_thresh))[0];
    boxes = boxes.index_select(0, keep);
    scores = scores.index_select(0, keep);
    lvl = lvl.index_select(0, keep);
    keep = kernels::BatchedNms(boxes, scores, lvl, config_.rpn_nms_thresh);
    keep = keep.narrow(0, 0, std::min<int64_t>(post_nms, keep.size(0)));
    out.proposals.push_back(boxes.index_select(0, keep));
    out.scores.push_back(scores.index_select(0, keep));
  }
}

FeatureStageOutput MaskRcnnImpl::FeatureStage(const at::Tensor& batch) {
  FeatureStageOutput out;
  out.features = Features(batch);
  std::tie(out.rpn_logits, out.rpn_deltas) = rpn_head_->Forward(out.features);
  return out;
}

std::vector<at::Tensor> MaskRcnnImpl::FeatureStageParameters() const {
  std::vector<at::Tensor> out;
  for (const auto* module : {static_cast<const torch::nn::Module*>(body_.get()),
                             static_cast<const torch::nn::Module*>(neck_.get()),
                             static_cast<const torch::nn::Module*>(rpn_head_.get())}) {
    for (const at::Tensor& p : module->parameters())
      if (p.requires_grad())
        out.push_back(p);
  }
  return out;
}

RpnOutput MaskRcnnImpl::Rpn(const ImageBatch& batch, const std::vector<at::Tensor>& features,
                            const std::vector<ImageTarget>* targets) {
  FeatureStageOutput stage;
  stage.features = features;
  std::tie(stage.rpn_logits, stage.rpn_deltas) = rpn_head_->Forward(features);
  return Rpn(batch, stage, targets);
}

RpnOutput MaskRcnnImpl::Rpn(const ImageBatch& batch, const FeatureStageOutput& stage,
                            const std::vector<ImageTarget>* targets) {
  const std::vector<at::Tensor>& features = stage.features;
  const std::vector<at::Tensor>& logits = stage.rpn_logits;
  const std::vector<at::Tensor>& deltas = stage.rpn_deltas;
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
    flat_logits.push_back(PermuteAndFlatten(logits[l].to(torch::kFloat), 1));
    flat_deltas.push_back(PermuteAndFlatten(deltas[l].to(torch::kFloat), 4));
  }
  std::vector<std::vector<double>> ratios = config_.anchor_aspect_ratios;
  if (ratios.size() == 1)
    ratios.assign(config_.anchor_sizes.size(), ratios.front());
  at::Tensor anchors = kernels::GenerateAnchors(sizes, strides, config_.anchor_sizes, ratios,
                                                batch.tensors.device());
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
    TORCH_CHECK(targets != nullptr, "MaskRcnn: training mode needs targets");
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
      auto [pos, neg] = kernels::SampleBalanced(a.labels, config_.rpn_batch_size_per_image,
                                                config_.rpn_positive_fraction,
                                                SamplingGenerator(static_cast<size_t>(i)));
      pos_masks.push_back(pos);
      neg_masks.push_back(neg);
    }
    // Over every anchor, the unsampled ones masked out: the sampled set's size is only known
    // on the device, and selecting it (nonzero) would make the host wait. Same sums as over
    // the selected anchors, in another order.
    const at::Tensor pos = torch::cat(pos_masks);
    const at::Tensor sampled = pos.logical_or(torch::cat(neg_masks));
    const at::Tensor num_sampled = sampled.sum().to(torch::kFloat);
    at::Tensor box_loss = BoxRegressionLossSumWhere(
                              rpn_box_loss_, pred_deltas, torch::cat(regression_targets),
                              all_anchors, torch::cat(matched_boxes), {1.0, 1.0, 1.0, 1.0}, pos) *
                          config_.rpn_bbox_reg_loss_weight / num_sampled;
    const at::Tensor bce = F::binary_cross_entropy_with_logits(
        objectness.flatten(), torch::cat(labels).clamp_min(0),
        F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
    at::Tensor obj_loss = at::where(sampled, bce, at::zeros({}, bce.options())).sum() / num_sampled;
    out.losses["loss_objectness"] = obj_loss;
    out.losses["loss_rpn_box_reg"] = box_loss;
  }
  return out;
}

std::optional<at::Generator> MaskRcnnImpl::SamplingGenerator(size_t image) const {
  if (sampling_generators_.empty())
    return std::nullopt;
  TORCH_CHECK(image < sampling_generators_.size(), "MaskRcnn: ", sampling_generators_.size(),
              " sampling generators for a batch with more images");
  return sampling_generators_[image];
}

ImageResult MaskRcnnImpl::SelectDetections(at::Tensor boxes, at::Tensor scores) const {
  const int64_t num_classes = scores.size(-1);
  at::Tensor cls = torch::arange(num_classes, scores.options().dtype(torch::kLong))
                       .view({1, -1})
                       .expand_as(scores);
  using torch::indexing::Slice;
  boxes = boxes.index({Slice(), Slice(1)}).reshape({-1, 4});
  scores = scores.index({Slice(), Slice(1)}).reshape({-1});
  cls = cls.index({Slice(), Slice(1)}).reshape({-1});
  at::Tensor keep = torch::where(scores.gt(settings_.score_thresh))[0];
  boxes = boxes.index_select(0, keep);
  scores = scores.index_select(0, keep);
  cls = cls.index_select(0, keep);
  keep = KeepNonSmall(boxes, 1e-2);
  boxes = boxes.index_select(0, keep);
  scores = scores.index_select(0, keep);
  cls = cls.index_select(0, keep);
  keep = kernels::BatchedNms(boxes, scores, cls, config_.box_nms_thresh);
  keep = keep.narrow(0, 0, std::min<int64_t>(settings_.detections_per_image, keep.size(0)));
  ImageResult r;
  r.boxes = boxes.index_select(0, keep);
  r.scores = scores.index_select(0, keep);
  r.labels = cls.index_select(0, keep);
  return r;
}

at::Tensor MaskRcnnImpl::MaskLoss(const at::Tensor& mask_logits,
                                  const std::vector<ImageTarget>& targets,
                                  const std::vector<at::Tensor>& mask_boxes,
                                  const std::vector<at::Tensor>& mask_matched,
                                  const at::Tensor& valid) const {
  std::vector<at::Tensor> mask_labels, mask_targets;
  const int64_t m = mask_logits.size(-1);
  for (size_t i = 0; i < mask_boxes.size(); ++i) {
    const ImageTarget& t = targets[i];
    mask_labels.push_back(t.labels.index_select(0, mask_matched[i]));
    if (mask_boxes[i].size(0) == 0) {
      mask_targets.push_back(torch::zeros({0, m, m}, mask_logits.options()));
      continue;
    }
    // project_masks_on_boxes: ROIAlign of the gt mask, adaptive sampling (torchvision -1 = our 0),
    // not aligned.
    at::Tensor roi =
        torch::cat({mask_matched[i].to(mask_boxes[i].dtype()).unsqueeze(1), mask_boxes[i]}, 1);
    at::Tensor gt_masks = t.masks.unsqueeze(1).to(roi.dtype());
    mask_targets.push_back(kernels::RoiAlign(gt_masks, roi, 1.0, m, m, 0, false).select(1, 0));
  }
  at::Tensor all_labels = torch::cat(mask_labels);
  at::Tensor all_targets = torch::cat(mask_targets);
  if (all_targets.numel() == 0) {
    return mask_logits.sum() * 0;
  }
  at::Tensor idx = torch::arange(all_labels.size(0), all_labels.options());
  // The mean over the valid rows' pixels (torchvision's mean over the positives); none: 0.
  const at::Tensor bce = F::binary_cross_entropy_with_logits(
      mask_logits.index({idx, all_labels}), all_targets,
      F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
  const at::Tensor per_row = bce.flatten(1).sum(1);
  const at::Tensor count = (valid.sum() * m * m).to(torch::kFloat).clamp_min(1);
  return at::where(valid, per_row, at::zeros({}, per_row.options())).sum() / count;
}

void MaskRcnnImpl::AttachMasks(const at::Tensor& mask_logits,
                               std::vector<ImageResult>& detections) const {
  int64_t offset = 0;
  for (auto& r : detections) {
    const int64_t n = r.boxes.size(0);
    if (n == 0) {
      const int64_t m = 2 * config_.mask_pooler_resolution;
      r.masks = torch::zeros({0, 1, m, m}, r.boxes.options());
      continue;
    }
    r.masks = mask_logits.narrow(0, offset, n).sigmoid().unsqueeze(1);
    offset += n;
  }
}

MaskRcnnImpl::RoiSamples MaskRcnnImpl::SampleRoiTargets(
    const std::vector<ImageTarget>& targets, std::vector<at::Tensor>& proposals,
    const std::vector<at::Tensor>* proposal_valid) const {
  const size_t num_images = proposals.size();
  RoiSamples s;
  s.labels.resize(num_images);
  s.matched_idxs.resize(num_images);
  s.regression_targets.resize(num_images);
  s.matched_boxes.resize(num_images);
  s.valid.resize(num_images);
  for (size_t i = 0; i < num_images; ++i) {
    const ImageTarget& t = targets[i];
    at::Tensor gt = t.boxes.to(proposals[i].dtype());
    proposals[i] = torch::cat({proposals[i], gt});
    Assignment a = Assign(gt, t.labels, proposals[i], config_.box_fg_iou_thresh,
                          config_.box_bg_iou_thresh, false);
    if (proposal_valid != nullptr && !proposal_valid->empty()) {
      // Padding proposals are ignored (label -1): the sampler never takes them. The gt
      // boxes appended above are always candidates.
      const at::Tensor valid = torch::cat(
          {(*proposal_valid)[i], torch::ones({gt.size(0)}, (*proposal_valid)[i].options())});
      a.labels.masked_fill_(valid.logical_not(), -1);
    }
    auto [pos, neg] = kernels::SampleBalanced(a.labels, config_.box_batch_size_per_image,
                                              config_.box_positive_fraction, SamplingGenerator(i));
    // A fixed number of rows, known on the host: the sampler takes at most
    // box_batch_size_per_image. A stable sort puts the sampled candidates first, in index
    // order (nonzero's order); rows past their count are padding, marked invalid, with label
    // 0 so that every row indexes a class.
    const at::Tensor chosen = pos.logical_or(neg);
    const int64_t rows = std::min<int64_t>(config_.box_batch_size_per_image, chosen.size(0));
    const at::Tensor sampled =
        std::get<1>(chosen.to(torch::kByte).sort(/*stable=*/true, 0, /*descending=*/true))
            .narrow(0, 0, rows);
    s.valid[i] = torch::arange(rows, chosen.options().dtype(torch::kLong)) < chosen.sum();
    proposals[i] = proposals[i].index_select(0, sampled);
    s.labels[i] = a.labels.index_select(0, sampled).masked_fill_(s.valid[i].logical_not(), 0);
    s.matched_idxs[i] = a.matched.index_select(0, sampled);
    at::Tensor gt_or_zero = gt.numel() == 0 ? torch::zeros({1, 4}, gt.options()) : gt;
    s.matched_boxes[i] = gt_or_zero.index_select(0, s.matched_idxs[i]);
    s.regression_targets[i] =
        kernels::EncodeBoxes(s.matched_boxes[i], proposals[i], config_.bbox_reg_weights);
  }
  return s;
}

std::vector<ImageResult> MaskRcnnImpl::SelectAllDetections(
    const at::Tensor& class_logits, const at::Tensor& box_regression,
    const std::vector<at::Tensor>& proposals,
    const std::vector<std::array<int64_t, 2>>& image_sizes) const {
  std::vector<ImageResult> detections;
  std::vector<int64_t> per_image;
  for (const auto& p : proposals)
    per_image.push_back(p.size(0));
  at::Tensor all_props = torch::cat(proposals);
  at::Tensor pred_boxes = kernels::DecodeBoxes(box_regression, all_props, config_.bbox_reg_weights)
                              .reshape({all_props.size(0), -1, 4});
  at::Tensor pred_scores = torch::softmax(class_logits, -1);
  auto boxes_split = pred_boxes.split_with_sizes(per_image, 0);
  auto scores_split = pred_scores.split_with_sizes(per_image, 0);
  for (size_t i = 0; i < proposals.size(); ++i) {
    detections.push_back(SelectDetections(
        ClipBoxes(boxes_split[i], image_sizes[i][0], image_sizes[i][1]), scores_split[i]));
  }
  return detections;
}

std::vector<at::Tensor> MaskRcnnImpl::PooledMaps(const std::vector<at::Tensor>& features) const {
  const size_t pooled_levels = features.size() - static_cast<size_t>(neck_->NumRpnOnlyLevels());
  std::vector<at::Tensor> maps(features.begin(),
                               features.begin() + static_cast<std::ptrdiff_t>(pooled_levels));
  for (at::Tensor& map : maps) {
    // CPU inference pools from channels-last float32 maps: RoIAlign then reads each tap's
    // channels as one vector (about 3x faster than planar maps, the same numbers), and the
    // reduced-precision path (CpuBf16Scope) keeps RoIAlign in float32, where bf16's 8-bit
    // mantissa would shift boxes and mask edges.
    if (CpuInferenceFastPath(map) || CpuBf16Path(map))
      map = map.to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
  }
  return maps;
}

MaskRcnnImpl::MaskRows MaskRcnnImpl::SelectMaskRows(const RoiSamples& samples,
                                                    const std::vector<at::Tensor>& proposals,
                                                    const std::vector<ImageTarget>& targets,
                                                    bool fixed_rows) const {
  const auto max_positives = static_cast<int64_t>(
      static_cast<double>(config_.box_batch_size_per_image) * config_.box_positive_fraction);
  MaskRows out;
  std::vector<at::Tensor> valid_rows;
  for (size_t i = 0; i < proposals.size(); ++i) {
    const at::Tensor pos_i = samples.valid[i].logical_and(samples.labels[i].gt(0));
    int64_t rows_i = 0;
    if (targets[i].boxes.size(0) > 0)
      rows_i = fixed_rows ? std::min<int64_t>(max_positives, pos_i.size(0))
                          : pos_i.sum().item<int64_t>();
    const at::Tensor p =
        std::get<1>(pos_i.to(torch::kByte).sort(/*stable=*/true, 0, /*descending=*/true))
            .narrow(0, 0, rows_i);
    out.boxes.push_back(proposals[i].index_select(0, p));
    out.matched.push_back(samples.matched_idxs[i].index_select(0, p));
    valid_rows.push_back(torch::arange(rows_i, p.options()) < pos_i.sum());
  }
  out.valid = torch::cat(valid_rows);
  return out;
}

std::map<std::string, at::Tensor> MaskRcnnImpl::RoiHeads(
    const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& proposals_in,
    const std::vector<std::array<int64_t, 2>>& image_sizes, const std::vector<ImageTarget>* targets,
    std::vector<ImageResult>* detections, const std::vector<at::Tensor>* proposal_valid) {
  const bool training = is_training();
  const std::vector<at::Tensor> maps = PooledMaps(features);
  const std::vector<double> scales = PoolerScales(maps, image_sizes);
  std::vector<at::Tensor> proposals = proposals_in;
  RoiSamples samples;
  std::map<std::string, at::Tensor> losses;

  if (training) {
    TORCH_CHECK(targets != nullptr, "MaskRcnn: training mode needs targets");
    samples = SampleRoiTargets(*targets, proposals, proposal_valid);
  }
  const std::vector<at::Tensor>& labels = samples.labels;
  const std::vector<at::Tensor>& regression_targets = samples.regression_targets;
  const std::vector<at::Tensor>& matched_boxes = samples.matched_boxes;

  Phase("roi_maps");
  at::Tensor pooled = kernels::MultiLevelRoiAlign(
      maps, ToRois(proposals), scales, config_.box_pooler_resolution, config_.box_pooler_resolution,
      config_.box_pooler_sampling_ratio, false);
  Phase("box_pool");
  auto [class_logits_raw, box_regression_raw] = box_predictor_->Forward(box_head_->Forward(pooled));
  Phase("box_head");
  at::Tensor class_logits = class_logits_raw.to(torch::kFloat);
  at::Tensor box_regression = box_regression_raw.to(torch::kFloat);
  const int64_t num_classes = class_logits.size(-1);

  std::vector<at::Tensor> mask_boxes;
  std::vector<at::Tensor> mask_matched;
  at::Tensor mask_valid;
  if (training) {
    // Padding rows (SampleRoiTargets) add nothing; the means are over the sampled rows.
    const at::Tensor all_labels = torch::cat(labels);
    const at::Tensor valid = torch::cat(samples.valid);
    const at::Tensor num_sampled = valid.sum().to(torch::kFloat);
    const at::Tensor ce = F::cross_entropy(class_logits, all_labels,
                                           F::CrossEntropyFuncOptions().reduction(torch::kNone));
    losses["loss_classifier"] =
        at::where(valid, ce, at::zeros({}, ce.options())).sum() / num_sampled;
    const at::Tensor positive = valid.logical_and(all_labels.gt(0));
    const at::Tensor row = torch::arange(all_labels.size(0), all_labels.options());
    at::Tensor reg = box_regression.reshape({box_regression.size(0), num_classes, 4});
    losses["loss_box_reg"] =
        BoxRegressionLossSumWhere(box_loss_, reg.index({row, all_labels}),
                                  torch::cat(regression_targets), torch::cat(proposals),
                                  torch::cat(matched_boxes), config_.bbox_reg_weights, positive) *
        config_.bbox_reg_loss_weight / num_sampled;
    // Fixed rows on CUDA (no host sync), the exact positives on a CPU (set_fixed_mask_rows).
    MaskRows rows = SelectMaskRows(samples, proposals, *targets,
                                   fixed_mask_rows_.value_or(all_labels.is_cuda()));
    mask_boxes = std::move(rows.boxes);
    mask_matched = std::move(rows.matched);
    mask_valid = std::move(rows.valid);
  } else {
    TORCH_CHECK(detections != nullptr, "MaskRcnn: RoiHeads in eval mode needs a detections output");
    *detections = SelectAllDetections(class_logits, box_regression, proposals, image_sizes);
    for (const ImageResult& r : *detections)
      mask_boxes.push_back(r.boxes);
  }

  Phase("box_select");
  const bool run_masks = mask_head_ && (training || settings_.masks);
  if (run_masks) {
    at::Tensor rois = ToRois(mask_boxes);
    at::Tensor mask_logits;
    if (rois.size(0) > 0 || training) {
      at::Tensor mask_pooled = kernels::MultiLevelRoiAlign(
          maps, rois, scales, config_.mask_pooler_resolution, config_.mask_pooler_resolution,
          config_.mask_pooler_sampling_ratio, false);
      Phase("mask_pool");
      at::Tensor mask_features = mask_head_->Forward(mask_pooled);
      if (training) {
        mask_logits = mask_predictor_->Forward(mask_features).to(torch::kFloat);
      } else {
        // Inference needs only each detection's own class: N×M×M logits.
        std::vector<at::Tensor> detection_labels;
        for (const auto& r : *detections)
          detection_labels.push_back(r.labels);
        mask_logits = mask_predictor_->LabelLogits(mask_features, torch::cat(detection_labels))
                          .to(torch::kFloat);
      }
    }
    Phase("mask_head");
    if (training) {
      losses["loss_mask"] = MaskLoss(mask_logits, *targets, mask_boxes, mask_matched, mask_valid);
    } else {
      AttachMasks(mask_logits, *detections);
    }
  }
  return losses;
}

void MaskRcnnImpl::Postprocess(const ImageBatch& batch,
                               std::vector<ImageResult>& detections) const {
  for (size_t i = 0; i < detections.size(); ++i) {
    ImageResult& r = detections[i];
    const auto& resized = batch.image_sizes[i];
    const auto& original = batch.original_sizes[i];
    const float rh = static_cast<float>(original[0]) / static_cast<float>(resized[0]);
    const float rw = static_cast<float>(original[1]) / static_cast<float>(resized[1]);
    auto ratio = torch::tensor({rw, rh, rw, rh}, r.boxes.options());
    r.boxes = r.boxes * ratio;
    if (r.masks.defined() && settings_.paste_masks) {
      const bool binary = settings_.mask_threshold >= 0;
      if (r.masks.size(0) == 0) {
        r.masks = torch::zeros({0, 1, original[0], original[1]},
                               binary ? r.masks.options().dtype(torch::kByte) : r.masks.options());
      } else if (binary) {
        r.masks = kernels::PasteMasksBinary(r.masks, r.boxes, original[0], original[1], 1,
                                            settings_.mask_threshold);
      } else {
        r.masks = kernels::PasteMasks(r.masks, r.boxes, original[0], original[1], 1);
      }
    }
  }
}

MaskRcnnOutput MaskRcnnImpl::forward(const std::vector<at::Tensor>& images,
                                     const std::optional<std::vector<ImageTarget>>& targets) {
  MaskRcnnOutput out;
  std::vector<ImageTarget> scaled;
  if (targets)
    scaled = *targets;
  TORCH_CHECK(!is_training() || targets.has_value(), "MaskRcnn: training mode needs targets");
  Phase(nullptr);
  ImageBatch batch = Transform(images, targets ? &scaled : nullptr);
  Phase("transform");
  std::vector<at::Tensor> features = Features(batch.tensors);
  RpnOutput rpn = Rpn(batch, features, is_training() ? &scaled : nullptr);
  Phase("rpn");
  if (is_training()) {
    out.losses = RoiHeads(features, rpn.proposals, batch.image_sizes, &scaled, nullptr, &rpn.valid);
    for (auto& [k, v] : rpn.losses)
      out.losses[k] = v;
  } else {
    RoiHeads(features, rpn.proposals, batch.image_sizes, nullptr, &out.detections);
    Postprocess(batch, out.detections);
    Phase("paste");
  }
  return out;
}

}  // namespace mrcnn::model
