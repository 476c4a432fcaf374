#pragma once
// Box operations that both the RPN stage (rpn/) and the ROI heads (roi_heads/) use, as
// torchvision's detection utilities define them.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::model {

// A dense head's per-level output N x (A*C) x H x W laid out N x (H*W*A) x C (torchvision's
// permute_and_flatten, Detectron2's permute_to_N_HWA_K): the RPN's and RetinaNet's.
at::Tensor PermuteToNHwaK(const at::Tensor& x, int64_t c);

// Boxes (... x 4, x1 y1 x2 y2) clamped to a height x width image (torchvision clip_boxes_to_image).
at::Tensor ClipBoxes(const at::Tensor& boxes, int64_t height, int64_t width);

// Indices of the boxes (N x 4) whose width and height are both >= min_size (torchvision's
// remove_small_boxes), or with `strictly` both > min_size (Detectron2's Boxes.nonempty).
at::Tensor KeepNonSmall(const at::Tensor& boxes, double min_size, bool strictly = false);

// Matcher-based labelling shared by RPN and ROI heads: labels are 1/gt label for
// matches, 0 below the low threshold, -1 between thresholds.
struct Assignment {
  at::Tensor matched;  // clamped gt index per prediction
  at::Tensor labels;   // int64
};

// Each prediction (P x 4) matched to the ground truth (G x 4, labels G) by IoU: matched at
// >= high, background below low, ignored between; allow_low_quality keeps each gt's best
// predictions matched (torchvision's Matcher).
Assignment Assign(const at::Tensor& gt_boxes, const at::Tensor& gt_labels,
                  const at::Tensor& predictions, double high, double low, bool allow_low_quality);

}  // namespace mrcnn::model
