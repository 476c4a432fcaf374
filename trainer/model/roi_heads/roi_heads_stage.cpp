// The ROI heads' stage (torchvision's RoIHeads with MultiScaleRoIAlign): the box head over
// the proposals, then the mask head over the positives (training) or the detections.
#include <torch/torch.h>

#include <cmath>

#include "kernels/ops.h"
#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/mask_rcnn.h"
#include "trainer/model/roi_heads/cascade_roi_heads.h"
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

std::vector<at::Tensor> MaskRcnnImpl::PooledMaps(const std::vector<at::Tensor>& features) const {
  const size_t pooled_levels = features.size() - static_cast<size_t>(neck_->NumRpnOnlyLevels());
  std::vector<at::Tensor> maps(features.begin(),
                               features.begin() + static_cast<std::ptrdiff_t>(pooled_levels));
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

  TORCH_CHECK(training || detections != nullptr,
              "MaskRcnn: RoiHeads in eval mode needs a detections output");
  // The box pooler over the maps, for the standard head's proposals and each cascade stage's.
  const CascadeRoiHeads::BoxPooler pool = [&](const std::vector<at::Tensor>& boxes) {
    return kernels::MultiLevelRoiAlign(
        maps, ToRois(boxes), scales, config_.box_pooler_resolution, config_.box_pooler_resolution,
        config_.box_pooler_sampling_ratio, config_.box_pooler_aligned);
  };
  if (config_.cascade()) {
    if (training) {
      losses = CascadeRoiHeads::Losses(
          *this, pool, {proposals, samples.labels, samples.matched_boxes, samples.valid}, *targets,
          image_sizes);
    } else {
      *detections = CascadeRoiHeads::Detect(*this, pool, proposals, image_sizes);
    }
  } else {
    Phase("roi_maps");
    at::Tensor pooled = pool(proposals);
    Phase("box_pool");
    auto [class_logits_raw, box_regression_raw] =
        box_predictor_->Forward(box_head_->Forward(pooled));
    Phase("box_head");
    at::Tensor class_logits = class_logits_raw.to(torch::kFloat);
    at::Tensor box_regression = box_regression_raw.to(torch::kFloat);
    if (training) {
      std::tie(losses["loss_classifier"], losses["loss_box_reg"]) =
          BoxHeadLosses(class_logits, box_regression, torch::cat(labels), torch::cat(samples.valid),
                        torch::cat(regression_targets), torch::cat(proposals),
                        torch::cat(matched_boxes), config_.bbox_reg_weights);
    } else {
      *detections = SelectAllDetections(class_logits, box_regression, proposals, image_sizes);
    }
  }
  // The mask and keypoint heads' rows: the sampled positives in training, else the detections.
  MaskRows rows;
  if (training) {
    // Fixed rows on CUDA (no host sync), the exact positives on a CPU (set_fixed_mask_rows).
    rows = SelectMaskRows(samples, proposals, *targets,
                          fixed_mask_rows_.value_or(proposals.front().is_cuda()));
  } else {
    for (const ImageResult& r : *detections)
      rows.boxes.push_back(r.boxes);
  }

  Phase("box_select");
  if (mask_head_ && (training || settings_.masks))
    MaskStage(maps, scales, rows, targets, detections, losses);
  if (keypoint_head_) {
    if (training) {
      losses["loss_keypoint"] = KeypointRoiHeads::Loss(
          *this, maps, scales, ToRois(rows.boxes), rows.boxes, rows.matched, rows.valid, *targets);
    } else {
      KeypointRoiHeads::Predict(*this, maps, scales, ToRois(rows.boxes), *detections);
    }
    Phase("keypoint_head");
  }
  return losses;
}

std::pair<at::Tensor, at::Tensor> MaskRcnnImpl::BoxHeadLosses(
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
                                proposals, matched_boxes, weights, positive) *
      config_.bbox_reg_loss_weight / num_sampled;
  return {std::move(loss_cls), std::move(loss_box_reg)};
}

void MaskRcnnImpl::MaskStage(const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                             const MaskRows& rows, const std::vector<ImageTarget>* targets,
                             std::vector<ImageResult>* detections,
                             std::map<std::string, at::Tensor>& losses) {
  const bool training = is_training();
  at::Tensor rois = ToRois(rows.boxes);
  at::Tensor mask_logits;
  if (rois.size(0) > 0 || training) {
    at::Tensor mask_pooled = kernels::MultiLevelRoiAlign(
        maps, rois, scales, config_.mask_pooler_resolution, config_.mask_pooler_resolution,
        config_.mask_pooler_sampling_ratio, config_.mask_pooler_aligned);
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
    losses["loss_mask"] = MaskLoss(mask_logits, *targets, rows.boxes, rows.matched, rows.valid);
  } else {
    AttachMasks(mask_logits, *detections);
  }
}

}  // namespace mrcnn::model
