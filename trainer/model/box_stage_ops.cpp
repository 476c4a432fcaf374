#include "trainer/model/box_stage_ops.h"

#include <torch/torch.h>

#include "kernels/ops.h"

namespace mrcnn::model {

at::Tensor ClipBoxes(const at::Tensor& boxes, int64_t height, int64_t width) {
  auto x = boxes.select(-1, 0).clamp(0, width);
  auto y = boxes.select(-1, 1).clamp(0, height);
  auto x2 = boxes.select(-1, 2).clamp(0, width);
  auto y2 = boxes.select(-1, 3).clamp(0, height);
  return torch::stack({x, y, x2, y2}, -1);
}

at::Tensor KeepNonSmall(const at::Tensor& boxes, double min_size, bool strictly) {
  auto ws = boxes.select(1, 2) - boxes.select(1, 0);
  auto hs = boxes.select(1, 3) - boxes.select(1, 1);
  if (strictly)
    return torch::where(ws.gt(min_size).logical_and(hs.gt(min_size)))[0];
  return torch::where(ws.ge(min_size).logical_and(hs.ge(min_size)))[0];
}

at::Tensor PermuteToNHwaK(const at::Tensor& x, int64_t c) {
  const int64_t n = x.size(0), h = x.size(2), w = x.size(3);
  return x.view({n, -1, c, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, c});
}

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

}  // namespace mrcnn::model
