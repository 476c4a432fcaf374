#pragma once
// Caffe2 / Detectron1 blob names to the names Detectron2 gives the same weights, as
// Detectron2's checkpoint/c2_model_loading.py renames them before its matching heuristics:
// the ImageNet backbones (ImageNetPretrained/MSRA/R-50.pkl, R-101.pkl, FAIR/X-101-32x8d.pkl)
// and Detectron1's detection models.
//   conv1_w                -> stem.conv1.weight
//   res_conv1_bn_s / _b    -> stem.conv1.norm.weight / .bias
//   res2_0_branch2a_w      -> res2.0.conv1.weight      (branch2b/2c: conv2/conv3)
//   res2_0_branch1_bn_s    -> res2.0.shortcut.norm.weight
//   *_bn_rm / _riv         -> *.norm.running_mean / .running_var (also gn, gamma/beta)
//   fpn_inner_res5_2_sum_w -> fpn_lateral5.weight;  fpn_res5_2_sum_w -> fpn_output5.weight
//   conv_rpn_fpn2_w        -> proposal_generator.rpn_head.conv.weight (rpn_cls_logits_fpn2,
//                             rpn_bbox_pred_fpn2: objectness_logits, anchor_deltas)
//   fc6_w / fc7_w          -> box_head.fc1.weight / box_head.fc2.weight
//   cls_score_w, bbox_pred_w, _[mask]_fcn1_w, conv5_mask_w, mask_fcn_logits_w
//                          -> cls_score.weight, bbox_pred.weight, mask_head.mask_fcn1.weight,
//                             mask_head.deconv.weight, mask_head.predictor.weight
//   fc1000_w               -> fc1000.weight (the ImageNet classifier; no model uses it)
// Names are left without the model's prefix (backbone.bottom_up., roi_heads., ...): the
// matching heuristics supply it (weight_name_mapping.h). Torch-free.
#include <string>
#include <string_view>

#include "trainer/model/weights/raw_tensor.h"

namespace mrcnn::model::weights {

std::string Caffe2NameToDetectron2(std::string_view caffe2_name);

// Detectron1's class-dependent layers count the background class first; Detectron2's
// box regression has no background rows and its classifier puts background last. Applied to
// a tensor renamed by Caffe2NameToDetectron2 (no-op for other names): bbox_pred loses its
// first 4 rows, mask_head.predictor its first channel, cls_score's first row moves last.
// Returns a note for the log ("" when nothing changed).
std::string RelayoutCaffe2ClassLayers(const std::string& detectron2_name, RawTensor& tensor);

}  // namespace mrcnn::model::weights
