// StandardROIHeads (standard_roi_heads.h): the parts built from the config, and the forward
// pass: the box stage over the proposals, then the mask and keypoint heads over the positives
// (training) or the detections. The registry of ROI heads is here too.
#include "trainer/model/roi_heads/standard_roi_heads.h"

#include <torch/torch.h>

#include <cmath>

#include "kernels/ops.h"
#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/parts.h"
#include "trainer/model/roi_heads/keypoint_roi_heads.h"

namespace mrcnn::model {
namespace {

namespace F = torch::nn::functional;

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

}  // namespace

StandardRoiHeads::StandardRoiHeads(const ModelConfig& config, SharedContext context, BoxHeadOnly)
    : config_(config), context_(std::move(context)) {
  box_loss_ = ParseBoxRegLoss(config_.bbox_reg_loss_type, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE");
  box_head_ = register_module("box_head", BoxHeadRegistry().Create(config_.box_head, config_));
  box_predictor_ = register_module(
      "box_predictor",
      std::make_shared<FastRcnnPredictor>(box_head_->RepresentationSize(), config_.num_classes + 1,
                                          config_.cls_agnostic_bbox_reg));
}

StandardRoiHeads::StandardRoiHeads(const ModelConfig& config, SharedContext context)
    : StandardRoiHeads(config, std::move(context), BoxHeadOnly{}) {
  if (config_.mask_on)
    RegisterMaskHead(MaskHeadRegistry().Create(config_.mask_head, config_), true);
  if (config_.keypoint_on)
    RegisterKeypointHead();
}

void StandardRoiHeads::RegisterMaskHead(std::shared_ptr<MaskHead> head, bool register_head) {
  mask_head_ = register_head ? register_module("mask_head", std::move(head)) : std::move(head);
  mask_predictor_ = register_module(
      "mask_predictor",
      std::make_shared<MaskRcnnPredictor>(mask_head_->OutChannels(), config_.mask_conv_dim,
                                          config_.cls_agnostic_mask ? 1 : config_.num_classes + 1));
}

void StandardRoiHeads::RegisterKeypointHead() {
  keypoint_head_ = register_module("keypoint_head",
                                   KeypointHeadRegistry().Create(config_.keypoint_head, config_));
  register_module("keypoint_predictor", keypoint_head_->Predictor());
}

std::vector<at::Tensor> StandardRoiHeads::PooledMaps(
    const std::vector<at::Tensor>& features) const {
  std::vector<at::Tensor> maps = features;
  for (at::Tensor& map : maps) {
    // CPU inference pools from channels-last float32 maps: RoIAlign then reads each tap's
    // channels as one vector (about 3x faster than planar maps, the same numbers), and bf16
    // mode (CpuPrecisionScope) keeps RoIAlign in float32, where bf16's 8-bit mantissa would
    // shift boxes and mask edges.
    if (CpuInferenceFastPath(map) || CpuBf16Path(map))
      map = map.to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
  }
  return maps;
}

std::map<std::string, at::Tensor> StandardRoiHeads::Forward(
    const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& proposals,
    const std::vector<std::array<int64_t, 2>>& image_sizes, const std::vector<ImageTarget>* targets,
    std::vector<ImageResult>* detections, const std::vector<at::Tensor>* proposal_valid) {
  const bool training = is_training();
  TORCH_CHECK(!training || targets != nullptr, "ROI heads: training mode needs targets");
  TORCH_CHECK(training || detections != nullptr, "ROI heads: eval mode needs a detections output");
  const std::vector<at::Tensor> maps = PooledMaps(features);
  const std::vector<double> scales = PoolerScales(maps, image_sizes);
  // The box pooler over the maps, for the box stage's proposals (every stage's in a cascade).
  const BoxPooler pool = [&](const std::vector<at::Tensor>& boxes) {
    return kernels::MultiLevelRoiAlign(
        maps, ToRois(boxes), scales, config_.box_pooler_resolution, config_.box_pooler_resolution,
        config_.box_pooler_sampling_ratio, config_.box_pooler_aligned);
  };
  std::map<std::string, at::Tensor> losses;
  // The mask and keypoint heads' rows: the sampled positives in training, else the detections.
  MaskRows rows;
  if (training) {
    const RoiSamples samples = SampleRoiTargets(*targets, proposals, proposal_valid);
    losses = BoxLosses(pool, samples, *targets, image_sizes);
    // Fixed rows on CUDA (no host sync), the exact positives on a CPU (ForwardContext).
    rows = SelectMaskRows(samples, *targets,
                          context_->fixed_mask_rows.value_or(proposals.front().is_cuda()));
  } else {
    *detections = BoxDetections(pool, proposals, image_sizes);
    for (const ImageResult& r : *detections)
      rows.boxes.push_back(r.boxes);
  }
  context_->Phase("box_select");
  if (mask_head_ && (training || context_->settings.masks))
    MaskStage(maps, scales, rows, targets, detections, losses);
  if (keypoint_head_)
    KeypointStage(maps, scales, rows, targets, detections, losses);
  return losses;
}

std::map<std::string, at::Tensor> StandardRoiHeads::BoxLosses(
    const BoxPooler& pool, const RoiSamples& samples, const std::vector<ImageTarget>& /*targets*/,
    const std::vector<std::array<int64_t, 2>>& /*image_sizes*/) {
  context_->Phase("roi_maps");
  const at::Tensor pooled = pool(samples.proposals);
  context_->Phase("box_pool");
  auto [class_logits, box_regression] = box_predictor_->Forward(box_head_->Forward(pooled));
  context_->Phase("box_head");
  std::map<std::string, at::Tensor> losses;
  std::tie(losses["loss_classifier"], losses["loss_box_reg"]) = BoxHeadLosses(
      class_logits.to(torch::kFloat), box_regression.to(torch::kFloat), torch::cat(samples.labels),
      torch::cat(samples.valid), torch::cat(samples.regression_targets),
      torch::cat(samples.proposals), torch::cat(samples.matched_boxes), config_.bbox_reg_weights);
  return losses;
}

std::vector<ImageResult> StandardRoiHeads::BoxDetections(
    const BoxPooler& pool, const std::vector<at::Tensor>& proposals,
    const std::vector<std::array<int64_t, 2>>& image_sizes) {
  context_->Phase("roi_maps");
  const at::Tensor pooled = pool(proposals);
  context_->Phase("box_pool");
  auto [class_logits, box_regression] = box_predictor_->Forward(box_head_->Forward(pooled));
  context_->Phase("box_head");
  return SelectAllDetections(class_logits.to(torch::kFloat), box_regression.to(torch::kFloat),
                             proposals, image_sizes);
}

void StandardRoiHeads::KeypointStage(const std::vector<at::Tensor>& maps,
                                     const std::vector<double>& scales, const MaskRows& rows,
                                     const std::vector<ImageTarget>* targets,
                                     std::vector<ImageResult>* detections,
                                     std::map<std::string, at::Tensor>& losses) {
  if (is_training()) {
    losses["loss_keypoint"] =
        KeypointRcnnLoss(config_, *keypoint_head_, maps, scales, ToRois(rows.boxes), rows.boxes,
                         rows.matched, rows.valid, *targets);
  } else {
    KeypointRcnnInference(config_, *keypoint_head_, maps, scales, ToRois(rows.boxes), *detections);
  }
  context_->Phase("keypoint_head");
}

std::pair<at::Tensor, at::Tensor> StandardRoiHeads::BoxHeadLosses(
    const at::Tensor& class_logits, const at::Tensor& box_regression, const at::Tensor& labels,
    const at::Tensor& valid, const at::Tensor& regression_targets, const at::Tensor& proposals,
    const at::Tensor& matched_boxes, const std::array<double, 4>& weights) const {
  // Padding rows (SampleRoiTargets) add nothing; the means are over the sampled rows.
  const at::Tensor num_sampled = valid.sum().to(torch::kFloat);
  const at::Tensor ce =
      F::cross_entropy(class_logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));
  at::Tensor loss_cls = at::where(valid, ce, at::zeros({}, ce.options())).sum() / num_sampled;
  const at::Tensor positive = valid.logical_and(labels.gt(0));
  const at::Tensor row = torch::arange(labels.size(0), labels.options());
  // Class-agnostic regression (one box per RoI) reads column 0 for every label.
  const int64_t reg_classes = box_regression.size(1) / 4;
  const at::Tensor reg = box_regression.reshape({box_regression.size(0), reg_classes, 4});
  const at::Tensor reg_column = reg_classes == 1 ? torch::zeros_like(labels) : labels;
  at::Tensor loss_box_reg =
      BoxRegressionLossSumWhere(box_loss_, reg.index({row, reg_column}), regression_targets,
                                proposals, matched_boxes, weights, positive,
                                config_.box_smooth_l1_beta) *
      config_.bbox_reg_loss_weight / num_sampled;
  return {std::move(loss_cls), std::move(loss_box_reg)};
}

void StandardRoiHeads::MaskStage(const std::vector<at::Tensor>& maps,
                                 const std::vector<double>& scales, const MaskRows& rows,
                                 const std::vector<ImageTarget>* targets,
                                 std::vector<ImageResult>* detections,
                                 std::map<std::string, at::Tensor>& losses) {
  const bool training = is_training();
  at::Tensor rois = ToRois(rows.boxes);
  at::Tensor mask_logits;
  if (rois.size(0) > 0 || training) {
    at::Tensor mask_pooled = kernels::MultiLevelRoiAlign(
        maps, rois, scales, config_.mask_pooler_resolution, config_.mask_pooler_resolution,
        config_.mask_pooler_sampling_ratio, config_.mask_pooler_aligned);
    context_->Phase("mask_pool");
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
  context_->Phase("mask_head");
  if (training) {
    losses["loss_mask"] = MaskLoss(mask_logits, *targets, rows.boxes, rows.matched, rows.valid);
  } else {
    AttachMasks(mask_logits, *detections);
  }
}

// Each in its own file of roi_heads/.
void RegisterRes5RoiHeads(Registry<RoiHeads, SharedContext>& registry);     // res5_roi_heads.cpp
void RegisterCascadeRoiHeads(Registry<RoiHeads, SharedContext>& registry);  // cascade_roi_heads.cpp

Registry<RoiHeads, SharedContext>& RoiHeadsRegistry() {
  static Registry<RoiHeads, SharedContext> registry("ROI heads", "MODEL.ROI_HEADS.NAME");
  static bool populated = [] {
    registry.Add("StandardROIHeads", [](const ModelConfig& c, SharedContext context) {
      return std::make_shared<StandardRoiHeads>(c, std::move(context));
    });
    RegisterRes5RoiHeads(registry);
    RegisterCascadeRoiHeads(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
