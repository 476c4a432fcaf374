#pragma once
// The model's configuration: the subset of a Detectron2-style config.yaml that shapes
// the network and its pre/post-processing. Keys and defaults are listed in
// trainer/model/README.md; defaults equal torchvision's maskrcnn_resnet50_fpn.
// Torch-free so the serving and engine code can read configs cheaply.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace mrcnn::model {

struct ModelConfig {
  // Whose conventions the network follows where torchvision and Detectron2 differ:
  // "torchvision", or "detectron2" when MODEL.BACKBONE.NAME names one of Detectron2's
  // builders (build_resnet_fpn_backbone: ResNet + FPN; build_resnet_backbone: C4 or DC5).
  // Detectron2's: the body from MODEL.RESNETS (stride in the 1x1 for MSRA weights, groups,
  // dilation), INPUT.FORMAT, unrounded anchors (sizes outer, ratios inner) at the levels'
  // nominal strides, proposals and detections kept when non-empty rather than above a
  // minimum size, POOLER_TYPE (ROIAlignV2: aligned), Detectron2's mask paste, and
  // Res5ROIHeads. Detectron2 checkpoints are re-laid out to our predictors on import
  // (trainer/model/weights/), so the predictors themselves are the same in both.
  std::string convention = "torchvision";
  // Registry names of the parts (see registry.h).
  std::string backbone = "resnet50";  // resnet18 | resnet50 | resnet101 | detectron2_resnet
  std::string neck = "fpn";           // fpn | none (the body's one output feeds the RPN and heads)
  // MODEL.RESNETS.* (the detectron2_resnet body only).
  int resnet_depth = 50;  // 50 | 101 | 152
  int resnet_num_groups = 1;
  int resnet_width_per_group = 64;
  bool resnet_stride_in_1x1 = true;
  int resnet_res5_dilation = 1;  // 1 | 2 (DC5)
  int resnet_stem_out_channels = 64;
  int resnet_res2_out_channels = 256;
  // The stages the body returns, finest first: res2..res5 (FPN), res4 (C4), res5 (DC5).
  std::vector<std::string> resnet_out_features = {"res2", "res3", "res4", "res5"};
  // MODEL.ROI_HEADS.NAME: StandardROIHeads (box and mask heads on the pooled maps) or
  // Res5ROIHeads (C4: ResNet's res5 stage on 14x14 pooled res4 features, shared by the box
  // predictor and the mask predictor).
  std::string roi_heads_name = "StandardROIHeads";
  std::string input_format = "RGB";  // INPUT.FORMAT: the channel order the weights expect
  double anchor_offset = 0.0;        // MODEL.ANCHOR_GENERATOR.OFFSET (detectron2 only)
  // POOLER_TYPE ROIAlignV2 (detectron2 default) pools with aligned=true; torchvision: false.
  bool box_pooler_aligned = false;
  bool mask_pooler_aligned = false;
  std::string rpn_head = "standard";
  std::string box_head = "two_mlp";
  std::string mask_head = "four_conv";

  std::string norm = "FrozenBN";  // FrozenBN | GN (GroupNorm, 32 groups, for training from scratch)
  double frozen_bn_eps = 1e-5;    // torchvision's COCO_V1 checkpoint was trained with 0.0
  int trainable_layers = 3;       // 0..5, counted from layer4 down to conv1 (torchvision semantics)
  int fpn_out_channels = 256;

  std::vector<std::vector<double>> anchor_sizes = {{32}, {64}, {128}, {256}, {512}};
  std::vector<std::vector<double>> anchor_aspect_ratios = {{0.5, 1.0, 2.0}};  // one entry = all levels
  int rpn_pre_nms_top_n_train = 2000;
  int rpn_pre_nms_top_n_test = 1000;
  int rpn_post_nms_top_n_train = 2000;
  int rpn_post_nms_top_n_test = 1000;
  double rpn_nms_thresh = 0.7;
  double rpn_bg_iou_thresh = 0.3;
  double rpn_fg_iou_thresh = 0.7;
  int rpn_batch_size_per_image = 256;
  double rpn_positive_fraction = 0.5;
  double rpn_score_thresh = 0.0;
  double rpn_min_size = 1e-3;
  // Box regression loss per head (box_losses.h): "smooth_l1" or "giou", and its weight.
  std::string rpn_bbox_reg_loss_type = "smooth_l1";
  double rpn_bbox_reg_loss_weight = 1.0;

  int num_classes = 90;  // foreground classes (Detectron2 convention); the network predicts num_classes + 1
  double box_score_thresh = 0.05;
  double box_nms_thresh = 0.5;
  int detections_per_image = 100;
  double box_fg_iou_thresh = 0.5;
  double box_bg_iou_thresh = 0.5;
  int box_batch_size_per_image = 512;
  double box_positive_fraction = 0.25;
  std::array<double, 4> bbox_reg_weights = {10.0, 10.0, 5.0, 5.0};
  std::string bbox_reg_loss_type = "smooth_l1";
  double bbox_reg_loss_weight = 1.0;
  int box_fc_dim = 1024;
  int box_pooler_resolution = 7;
  int box_pooler_sampling_ratio = 2;

  bool mask_on = true;
  // MODEL.CHANNELS_LAST: on CUDA the network runs on channels-last (NHWC) maps end to end,
  // the layout cuDNN's reduced-precision convolutions and our ROIAlign kernel read in place.
  // No effect on a CPU.
  bool channels_last = true;
  int mask_conv_dim = 256;
  int mask_pooler_resolution = 14;
  int mask_pooler_sampling_ratio = 2;

  // Pixel statistics in 0..255 units, RGB order (images are RGB everywhere in this project).
  std::array<double, 3> pixel_mean = {123.675, 116.28, 103.53};
  std::array<double, 3> pixel_std = {58.395, 57.12, 57.375};
  std::vector<int> min_size_train = {800};  // one is drawn per image in training
  int max_size_train = 1333;
  int min_size_test = 800;
  int max_size_test = 1333;
  int size_divisibility = 32;

  bool detectron2() const { return convention == "detectron2"; }
  // The strides of the levels the RPN sees, finest first (4..64 for FPN, 16 for C4 and DC5).
  std::vector<int64_t> FeatureStrides() const;
  // The channels of the maps the RPN and the ROI heads see: the FPN's, or the one stage's.
  int64_t FeatureChannels() const;
  // The side of the mask head's output (the masks before pasting): twice the mask pooler's
  // resolution, or the pooler's own with Res5ROIHeads (res5 halves what the deconv doubles).
  int64_t MaskResolution() const {
    return roi_heads_name == "Res5ROIHeads" ? mask_pooler_resolution : 2 * mask_pooler_resolution;
  }

  // Reads the keys this struct knows from a parsed config; other keys are ignored (the
  // engine's resolved config also carries SOLVER, DATASETS, ...). Throws
  // std::runtime_error naming `source` and the key on a wrong type or an invalid value.
  static ModelConfig FromYaml(const YAML::Node& root, const std::string& source);
  static ModelConfig FromYamlFile(const std::filesystem::path& path);
  // Writes every key (a complete config that FromYaml reads back identically).
  std::string ToYaml() const;
  // Throws when values are out of range (e.g. num_classes < 1, thresholds outside [0,1]).
  void Validate(const std::string& source) const;
};

}  // namespace mrcnn::model
