// Detections from the box head's outputs (torchvision's postprocess_detections) and their
// masks from the mask head's logits (maskrcnn_inference).
#include <torch/torch.h>

#include "kernels/ops.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/roi_heads/standard_roi_heads.h"

namespace mrcnn::model {

ImageResult StandardRoiHeads::SelectDetections(at::Tensor boxes, at::Tensor scores) const {
  const DetectionSettings& settings = context_->settings;
  const int64_t num_classes = scores.size(-1);
  at::Tensor cls = torch::arange(num_classes, scores.options().dtype(torch::kLong))
                       .view({1, -1})
                       .expand_as(scores);
  using torch::indexing::Slice;
  boxes = boxes.index({Slice(), Slice(1)}).reshape({-1, 4});
  scores = scores.index({Slice(), Slice(1)}).reshape({-1});
  cls = cls.index({Slice(), Slice(1)}).reshape({-1});
  at::Tensor keep = torch::where(scores.gt(settings.score_thresh))[0];
  boxes = boxes.index_select(0, keep);
  scores = scores.index_select(0, keep);
  cls = cls.index_select(0, keep);
  if (!config_.detectron2()) {
    // torchvision drops boxes under 1e-2 px here; Detectron2 keeps every box until its
    // postprocess drops the empty ones (Postprocess).
    keep = KeepNonSmall(boxes, 1e-2);
    boxes = boxes.index_select(0, keep);
    scores = scores.index_select(0, keep);
    cls = cls.index_select(0, keep);
  }
  keep = kernels::BatchedNms(boxes, scores, cls, config_.box_nms_thresh);
  keep = keep.narrow(0, 0, std::min<int64_t>(settings.detections_per_image, keep.size(0)));
  ImageResult r;
  r.boxes = boxes.index_select(0, keep);
  r.scores = scores.index_select(0, keep);
  r.labels = cls.index_select(0, keep);
  return r;
}

void StandardRoiHeads::AttachMasks(const at::Tensor& mask_logits,
                                   std::vector<ImageResult>& detections) const {
  int64_t offset = 0;
  for (auto& r : detections) {
    const int64_t n = r.boxes.size(0);
    if (n == 0) {
      const int64_t m = config_.MaskResolution();
      r.masks = torch::zeros({0, 1, m, m}, r.boxes.options());
      continue;
    }
    r.masks = mask_logits.narrow(0, offset, n).sigmoid().unsqueeze(1);
    offset += n;
  }
}

std::vector<ImageResult> StandardRoiHeads::SelectAllDetections(
    const at::Tensor& class_logits, const at::Tensor& box_regression,
    const std::vector<at::Tensor>& proposals,
    const std::vector<std::array<int64_t, 2>>& image_sizes) const {
  std::vector<ImageResult> detections;
  std::vector<int64_t> per_image;
  for (const auto& p : proposals)
    per_image.push_back(p.size(0));
  at::Tensor all_props = torch::cat(proposals);
  at::Tensor pred_boxes =
      kernels::DecodeBoxes(box_regression, all_props, config_.bbox_reg_weights)
          .reshape({all_props.size(0), box_regression.size(1) / 4, 4});  // also with no proposals
  at::Tensor pred_scores = torch::softmax(class_logits, -1);
  if (pred_boxes.size(1) == 1 && pred_scores.size(1) > 1) {
    // Class-agnostic regression: every class's box is the RoI's one box.
    pred_boxes = pred_boxes.expand({pred_boxes.size(0), pred_scores.size(1), 4});
  }
  auto boxes_split = pred_boxes.split_with_sizes(per_image, 0);
  auto scores_split = pred_scores.split_with_sizes(per_image, 0);
  for (size_t i = 0; i < proposals.size(); ++i) {
    detections.push_back(SelectDetections(
        ClipBoxes(boxes_split[i], image_sizes[i][0], image_sizes[i][1]), scores_split[i]));
  }
  return detections;
}

}  // namespace mrcnn::model
