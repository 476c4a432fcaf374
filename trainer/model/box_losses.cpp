#include "trainer/model/box_losses.h"

#include <torch/nn/functional/loss.h>

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "kernels/box_ops/box_ops_torchvision.h"

namespace mrcnn::model {

BoxRegLoss ParseBoxRegLoss(const std::string& name, const std::string& key) {
  if (name == "smooth_l1")
    return BoxRegLoss::kSmoothL1;
  if (name == "giou")
    return BoxRegLoss::kGiou;
  if (name == "diou")
    return BoxRegLoss::kDiou;
  if (name == "ciou")
    return BoxRegLoss::kCiou;
  throw std::invalid_argument(key + " must be smooth_l1, giou, diou or ciou, got \"" + name + "\"");
}

const char* BoxRegLossName(BoxRegLoss loss) {
  switch (loss) {
    case BoxRegLoss::kGiou:
      return "giou";
    case BoxRegLoss::kDiou:
      return "diou";
    case BoxRegLoss::kCiou:
      return "ciou";
    case BoxRegLoss::kSmoothL1:
      break;
  }
  return "smooth_l1";
}

at::Tensor SmoothL1Sum(const at::Tensor& input, const at::Tensor& target, double beta) {
  namespace F = torch::nn::functional;
  // torch's smooth_l1_loss is L1 at beta 0 exactly; fvcore's below 1e-5.
  return F::smooth_l1_loss(
      input, target,
      F::SmoothL1LossFuncOptions().reduction(torch::kSum).beta(beta < 1e-5 ? 0.0 : beta));
}

namespace {

// 1 - GIoU per row.
at::Tensor GiouLossRows(const at::Tensor& pred_boxes, const at::Tensor& target_boxes) {
  // As torchvision: half precision is upcast, the eps keeps degenerate boxes finite.
  constexpr double kEps = 1e-7;
  const auto dtype = at::promote_types(
      at::promote_types(pred_boxes.scalar_type(), target_boxes.scalar_type()), at::kFloat);
  const at::Tensor p = pred_boxes.to(dtype);
  const at::Tensor t = target_boxes.to(dtype);
  const at::Tensor x1 = p.select(1, 0), y1 = p.select(1, 1), x2 = p.select(1, 2),
                   y2 = p.select(1, 3);
  const at::Tensor x1g = t.select(1, 0), y1g = t.select(1, 1), x2g = t.select(1, 2),
                   y2g = t.select(1, 3);
  const at::Tensor xkis1 = at::max(x1, x1g), ykis1 = at::max(y1, y1g);
  const at::Tensor xkis2 = at::min(x2, x2g), ykis2 = at::min(y2, y2g);
  const at::Tensor intersection = at::where((ykis2 > ykis1).logical_and(xkis2 > xkis1),
                                            (xkis2 - xkis1) * (ykis2 - ykis1), at::zeros_like(x1));
  const at::Tensor union_area = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intersection;
  const at::Tensor iou = intersection / (union_area + kEps);
  const at::Tensor xc1 = at::min(x1, x1g), yc1 = at::min(y1, y1g);
  const at::Tensor xc2 = at::max(x2, x2g), yc2 = at::max(y2, y2g);
  const at::Tensor enclosing = (xc2 - xc1) * (yc2 - yc1);
  const at::Tensor giou = iou - (enclosing - union_area) / (enclosing + kEps);
  return 1 - giou;
}

// 1 - DIoU (or 1 - CIoU) per row.
at::Tensor DistanceIouLossRows(const at::Tensor& pred_boxes, const at::Tensor& target_boxes,
                               bool complete) {
  constexpr double kEps = 1e-7;
  const auto dtype = at::promote_types(
      at::promote_types(pred_boxes.scalar_type(), target_boxes.scalar_type()), at::kFloat);
  const at::Tensor p = pred_boxes.to(dtype);
  const at::Tensor t = target_boxes.to(dtype);
  const at::Tensor x1 = p.select(1, 0), y1 = p.select(1, 1), x2 = p.select(1, 2),
                   y2 = p.select(1, 3);
  const at::Tensor x1g = t.select(1, 0), y1g = t.select(1, 1), x2g = t.select(1, 2),
                   y2g = t.select(1, 3);
  const at::Tensor xkis1 = at::max(x1, x1g), ykis1 = at::max(y1, y1g);
  const at::Tensor xkis2 = at::min(x2, x2g), ykis2 = at::min(y2, y2g);
  const at::Tensor intersection = at::where((ykis2 > ykis1).logical_and(xkis2 > xkis1),
                                            (xkis2 - xkis1) * (ykis2 - ykis1), at::zeros_like(x1));
  const at::Tensor union_area = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intersection;
  const at::Tensor iou = intersection / (union_area + kEps);
  const at::Tensor diagonal = (at::max(x2, x2g) - at::min(x1, x1g)).pow(2) +
                              (at::max(y2, y2g) - at::min(y1, y1g)).pow(2) + kEps;
  const at::Tensor distance =
      ((x1 + x2) / 2 - (x1g + x2g) / 2).pow(2) + ((y1 + y2) / 2 - (y1g + y2g) / 2).pow(2);
  at::Tensor loss = 1 - iou + distance / diagonal;
  if (!complete)
    return loss;
  const at::Tensor v =
      (4 / (std::numbers::pi * std::numbers::pi)) *
      (at::atan((x2g - x1g) / (y2g - y1g)) - at::atan((x2 - x1) / (y2 - y1))).pow(2);
  // The aspect term's weight is a constant of the step (no gradient), as in the references.
  const at::Tensor alpha = (v / (1 - iou + v + kEps)).detach();
  return loss + alpha * v;
}

// Per row: the IoU-type loss between the boxes the deltas decode to and the targets.
at::Tensor DecodedIouLossRows(BoxRegLoss loss, const at::Tensor& pred_deltas,
                              const at::Tensor& reference_boxes, const at::Tensor& target_boxes,
                              const std::array<double, 4>& weights) {
  // kernels::DecodeBoxes has no backward; torchvision's composite formula does.
  const at::Tensor pred_boxes = kernels::TorchvisionDecodeBoxes(
      pred_deltas.to(at::kFloat), reference_boxes, weights, std::log(1000.0 / 16));
  if (loss == BoxRegLoss::kGiou)
    return GiouLossRows(pred_boxes, target_boxes);
  return DistanceIouLossRows(pred_boxes, target_boxes, loss == BoxRegLoss::kCiou);
}

}  // namespace

at::Tensor DistanceIouLossSum(const at::Tensor& pred_boxes, const at::Tensor& target_boxes,
                              bool complete) {
  return DistanceIouLossRows(pred_boxes, target_boxes, complete).sum();
}

at::Tensor GiouLossSum(const at::Tensor& pred_boxes, const at::Tensor& target_boxes) {
  return GiouLossRows(pred_boxes, target_boxes).sum();
}

at::Tensor BoxRegressionLossSum(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                const at::Tensor& target_deltas, const at::Tensor& reference_boxes,
                                const at::Tensor& target_boxes,
                                const std::array<double, 4>& weights, double beta) {
  if (loss == BoxRegLoss::kSmoothL1) {
    return SmoothL1Sum(pred_deltas, target_deltas, beta);
  }
  return DecodedIouLossRows(loss, pred_deltas, reference_boxes, target_boxes, weights).sum();
}

at::Tensor BoxRegressionLossSumWhere(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                     const at::Tensor& target_deltas,
                                     const at::Tensor& reference_boxes,
                                     const at::Tensor& target_boxes,
                                     const std::array<double, 4>& weights, const at::Tensor& rows,
                                     double beta) {
  at::Tensor per_row;
  if (loss == BoxRegLoss::kSmoothL1) {
    namespace F = torch::nn::functional;
    per_row =
        F::smooth_l1_loss(
            pred_deltas, target_deltas,
            F::SmoothL1LossFuncOptions().reduction(torch::kNone).beta(beta < 1e-5 ? 0.0 : beta))
            .sum(1);
  } else {
    per_row = DecodedIouLossRows(loss, pred_deltas, reference_boxes, target_boxes, weights);
  }
  // where, not a product: 0 * inf would be NaN.
  return at::where(rows, per_row, at::zeros({}, per_row.options())).sum();
}

}  // namespace mrcnn::model
