#pragma once
// Box regression losses of the RPN and the ROI box head, selected per head as Detectron2's
// MODEL.RPN.BBOX_REG_LOSS_TYPE / MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE do: smooth L1 on the
// encoded deltas (at the head's SMOOTH_L1_BETA: torchvision's 1/9, Detectron2's 0, i.e. L1),
// or an IoU loss on the boxes decoded from them: generalised IoU (Rezatofighi et al. 2019),
// distance IoU or complete IoU (Zheng et al. 2020), as torchvision.ops and Detectron2's
// layers/losses.py compute them.
#include <ATen/core/Tensor.h>

#include <array>
#include <string>

namespace mrcnn::model {

enum class BoxRegLoss { kSmoothL1, kGiou, kDiou, kCiou };

// "smooth_l1", "giou", "diou" or "ciou"; anything else throws std::invalid_argument naming
// `key`.
BoxRegLoss ParseBoxRegLoss(const std::string& name, const std::string& key);
const char* BoxRegLossName(BoxRegLoss loss);

// Sum of smooth L1 over all elements: beta 1/9 is torchvision's RPN and ROI box loss;
// RetinaNet passes MODEL.RETINANET.SMOOTH_L1_LOSS_BETA, where below 1e-5 means L1 (fvcore's
// smooth_l1_loss rule).
at::Tensor SmoothL1Sum(const at::Tensor& input, const at::Tensor& target, double beta = 1.0 / 9);

// Sum over rows of 1 - GIoU(pred, target) for N×4 (x1, y1, x2, y2) boxes:
// torchvision.ops.generalized_box_iou_loss(..., reduction="sum", eps=1e-7).
// Differentiable (plain tensor ops); computed in float32 at least.
at::Tensor GiouLossSum(const at::Tensor& pred_boxes, const at::Tensor& target_boxes);

// Sum over rows of 1 - DIoU (`complete` false) or 1 - CIoU (true) for N×4 boxes:
// torchvision.ops.distance_box_iou_loss / complete_box_iou_loss (reduction "sum", eps 1e-7),
// which equal Detectron2's diou_loss / ciou_loss. CIoU's trade-off weight alpha carries no
// gradient, as in both.
at::Tensor DistanceIouLossSum(const at::Tensor& pred_boxes, const at::Tensor& target_boxes,
                              bool complete);

// The loss of one head over its positive samples, summed (the caller normalises):
// smooth L1 at `beta` between `pred_deltas` and `target_deltas`, or an IoU loss between the
// boxes `pred_deltas` decode to on `reference_boxes` (anchors or proposals, with the head's
// box-coder `weights`) and `target_boxes` (the matched ground truth). Decoding is
// torchvision's BoxCoder.decode_single (Detectron2's apply_deltas) in differentiable tensor ops.
at::Tensor BoxRegressionLossSum(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                const at::Tensor& target_deltas, const at::Tensor& reference_boxes,
                                const at::Tensor& target_boxes,
                                const std::array<double, 4>& weights, double beta = 1.0 / 9);

// BoxRegressionLossSum over the rows where `rows` (bool, N) is true, with every row's
// inputs given: a fixed-size computation (no data-dependent shapes, so no host sync), equal
// to selecting the rows first up to the order of the sum. Rows outside `rows` add exactly
// 0 and send no gradient, whatever their values (a target of an image without ground
// truth may be infinite).
at::Tensor BoxRegressionLossSumWhere(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                     const at::Tensor& target_deltas,
                                     const at::Tensor& reference_boxes,
                                     const at::Tensor& target_boxes,
                                     const std::array<double, 4>& weights, const at::Tensor& rows,
                                     double beta = 1.0 / 9);

}  // namespace mrcnn::model
