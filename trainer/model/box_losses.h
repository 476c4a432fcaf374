#pragma once
// Box regression losses of the RPN and the ROI box head, selected per head as Detectron2's
// MODEL.RPN.BBOX_REG_LOSS_TYPE / MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE do: smooth L1 on the
// encoded deltas (torchvision's, beta 1/9) or generalised IoU on the boxes decoded from
// them (Rezatofighi et al. 2019; the loss SageMakerCV's fast recipes train with).
#include <ATen/core/Tensor.h>

#include <array>
#include <string>

namespace mrcnn::model {

enum class BoxRegLoss { kSmoothL1, kGiou };

// "smooth_l1" or "giou"; anything else throws std::invalid_argument naming `key`.
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

// The loss of one head over its positive samples, summed (the caller normalises):
// smooth L1 between `pred_deltas` and `target_deltas`, or GIoU between the boxes
// `pred_deltas` decode to on `reference_boxes` (anchors or proposals, with the head's
// box-coder `weights`) and `target_boxes` (the matched ground truth). Decoding is
// torchvision's BoxCoder.decode_single in differentiable tensor ops.
at::Tensor BoxRegressionLossSum(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                const at::Tensor& target_deltas, const at::Tensor& reference_boxes,
                                const at::Tensor& target_boxes,
                                const std::array<double, 4>& weights);

// BoxRegressionLossSum over the rows where `rows` (bool, N) is true, with every row's
// inputs given: a fixed-size computation (no data-dependent shapes, so no host sync), equal
// to selecting the rows first up to the order of the sum. Rows outside `rows` add exactly
// 0 and send no gradient, whatever their values (a target of an image without ground
// truth may be infinite).
at::Tensor BoxRegressionLossSumWhere(BoxRegLoss loss, const at::Tensor& pred_deltas,
                                     const at::Tensor& target_deltas,
                                     const at::Tensor& reference_boxes,
                                     const at::Tensor& target_boxes,
                                     const std::array<double, 4>& weights, const at::Tensor& rows);

}  // namespace mrcnn::model
