// What the ROI heads train on: the proposals' sampled targets (torchvision's
// select_training_samples), the mask head's rows, and the mask loss (maskrcnn_loss).
#include <torch/torch.h>

#include <tuple>

#include "kernels/ops.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/roi_heads/standard_roi_heads.h"

namespace mrcnn::model {
namespace F = torch::nn::functional;

at::Tensor StandardRoiHeads::MaskLoss(const at::Tensor& mask_logits,
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
    // torchvision's project_masks_on_boxes: ROIAlign of the gt mask, adaptive sampling
    // (torchvision's -1 = our 0), not aligned, soft targets in [0, 1]. Detectron2's
    // BitMasks.crop_and_resize: aligned, thresholded at 0.5, binary targets.
    at::Tensor roi =
        torch::cat({mask_matched[i].to(mask_boxes[i].dtype()).unsqueeze(1), mask_boxes[i]}, 1);
    at::Tensor gt_masks = t.masks.unsqueeze(1).to(roi.dtype());
    const bool detectron2 = config_.detectron2();
    at::Tensor target = kernels::RoiAlign(gt_masks, roi, 1.0, m, m, 0, detectron2).select(1, 0);
    mask_targets.push_back(detectron2 ? target.ge(0.5).to(target.dtype()) : target);
  }
  at::Tensor all_labels = torch::cat(mask_labels);
  at::Tensor all_targets = torch::cat(mask_targets);
  if (all_targets.numel() == 0) {
    return mask_logits.sum() * 0;
  }
  at::Tensor idx = torch::arange(all_labels.size(0), all_labels.options());
  if (mask_logits.size(1) == 1)  // class-agnostic: the one channel for every label
    all_labels = torch::zeros_like(all_labels);
  // The mean over the valid rows' pixels (torchvision's mean over the positives); none: 0.
  const at::Tensor bce = F::binary_cross_entropy_with_logits(
      mask_logits.index({idx, all_labels}), all_targets,
      F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
  const at::Tensor per_row = bce.flatten(1).sum(1);
  const at::Tensor count = (valid.sum() * m * m).to(torch::kFloat).clamp_min(1);
  return at::where(valid, per_row, at::zeros({}, per_row.options())).sum() / count;
}

StandardRoiHeads::RoiSamples StandardRoiHeads::SampleRoiTargets(
    const std::vector<ImageTarget>& targets, const std::vector<at::Tensor>& proposals_in,
    const std::vector<at::Tensor>* proposal_valid) const {
  const size_t num_images = proposals_in.size();
  RoiSamples s;
  s.proposals = proposals_in;
  std::vector<at::Tensor>& proposals = s.proposals;
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
    auto [pos, neg] =
        kernels::SampleBalanced(a.labels, config_.box_batch_size_per_image,
                                config_.box_positive_fraction, context_->SamplingGenerator(i));
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

StandardRoiHeads::MaskRows StandardRoiHeads::SelectMaskRows(const RoiSamples& samples,
                                                            const std::vector<ImageTarget>& targets,
                                                            bool fixed_rows) const {
  const std::vector<at::Tensor>& proposals = samples.proposals;
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

}  // namespace mrcnn::model
