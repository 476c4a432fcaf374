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
  // MODEL.RESNETS.DEFORM_ON_PER_STAGE (res2..res5): every block of a stage that is on has a
  // deformable 3x3 (kernels/ops.h DeformConv2d) with its offsets from conv2_offset, a 3x3 with a
  // bias over conv1's output (zero-initialised); DEFORM_MODULATED adds DCN v2's mask, and
  // DEFORM_NUM_GROUPS is the offsets' groups.
  std::vector<bool> resnet_deform_on_per_stage = {false, false, false, false};
  bool resnet_deform_modulated = false;
  int resnet_deform_num_groups = 1;
  // The stages the body returns, finest first: res2..res5 (FPN), res4 (C4), res5 (DC5).
  std::vector<std::string> resnet_out_features = {"res2", "res3", "res4", "res5"};
  // MODEL.ROI_HEADS.NAME (registry.h RoiHeadsRegistry): StandardROIHeads (box and mask heads
  // on the pooled maps), CascadeROIHeads (three box stages, see cascade_ious) or Res5ROIHeads
  // (C4: ResNet's res5 stage on 14x14 pooled res4 features, shared by the box predictor and
  // the mask predictor).
  std::string roi_heads_name = "StandardROIHeads";
  // MODEL.PROPOSAL_GENERATOR.NAME (ProposalGeneratorRegistry): RPN.
  std::string proposal_generator = "RPN";
  std::string input_format = "RGB";  // INPUT.FORMAT: the channel order the weights expect
  double anchor_offset = 0.0;        // MODEL.ANCHOR_GENERATOR.OFFSET (detectron2 only)
  // POOLER_TYPE ROIAlignV2 (detectron2 default) pools with aligned=true; torchvision: false.
  bool box_pooler_aligned = false;
  bool mask_pooler_aligned = false;
  std::string rpn_head = "standard";
  // two_mlp: torchvision's TwoMLPHead (Detectron2's FastRCNNConvFCHead with 0 convs and 2 fcs);
  // conv_fc: FastRCNNConvFCHead with box_num_conv 3x3 convs of box_conv_dim channels (each
  // followed by box_head_norm, then ReLU), then box_num_fc fcs of box_fc_dim.
  std::string box_head = "two_mlp";
  // four_conv: mask_num_conv 3x3 convs of mask_conv_dim channels (mask_head_norm after each,
  // then ReLU): torchvision's MaskRCNNHeads at 4 convs, Detectron2's MaskRCNNConvUpsampleHead.
  std::string mask_head = "four_conv";
  // Norms by Detectron2's get_norm names: "" (none: the conv has a bias), FrozenBN, GN (32
  // groups); a conv followed by a norm has no bias. MODEL.FPN.NORM, MODEL.ROI_BOX_HEAD.NORM,
  // MODEL.ROI_MASK_HEAD.NORM.
  std::string fpn_norm;
  std::string box_head_norm;
  std::string mask_head_norm;
  int box_num_conv = 0;
  int box_num_fc = 2;
  int box_conv_dim = 256;
  int mask_num_conv = 4;
  // MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK: one mask channel for every class.
  bool cls_agnostic_mask = false;

  std::string norm = "FrozenBN";  // FrozenBN | GN (GroupNorm, 32 groups, for training from scratch)
  double frozen_bn_eps = 1e-5;    // torchvision's COCO_V1 checkpoint was trained with 0.0
  int trainable_layers = 3;       // 0..5, counted from layer4 down to conv1 (torchvision semantics)
  int fpn_out_channels = 256;

  std::vector<std::vector<double>> anchor_sizes = {{32}, {64}, {128}, {256}, {512}};
  std::vector<std::vector<double>> anchor_aspect_ratios = {
      {0.5, 1.0, 2.0}};  // one entry = all levels
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
  // Box regression loss per head (box_losses.h): "smooth_l1", "giou", "diou" or "ciou", and its
  // weight. MODEL.RPN.SMOOTH_L1_BETA: torchvision's 1/9, Detectron2's 0 (L1) unless its config
  // says otherwise. MODEL.RPN.LOSS_WEIGHT scales both RPN losses (Detectron2's).
  std::string rpn_bbox_reg_loss_type = "smooth_l1";
  double rpn_bbox_reg_loss_weight = 1.0;
  double rpn_smooth_l1_beta = 1.0 / 9;
  double rpn_loss_weight = 1.0;

  int num_classes =
      90;  // foreground classes (Detectron2 convention); the network predicts num_classes + 1
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
  double box_smooth_l1_beta = 1.0 / 9;  // MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA (Detectron2's: 0)
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
  // INPUT.MIN_SIZE_TRAIN_SAMPLING, how the training size is drawn (Detectron2's
  // ResizeShortestEdge): "choice", one of min_size_train; "range", a uniform integer in
  // [min_size_train[0], min_size_train[1]].
  std::string min_size_train_sampling = "choice";
  int max_size_train = 1333;
  int min_size_test = 800;
  int max_size_test = 1333;
  int size_divisibility = 32;

  // MODEL.META_ARCHITECTURE (MetaArchRegistry): GeneralizedRCNN (RPN + ROI heads) or RetinaNet (one
  // stage: a dense head on P3-P7, no RPN and no ROI heads; num_classes then comes from
  // MODEL.RETINANET.NUM_CLASSES).
  std::string meta_architecture = "GeneralizedRCNN";
  // MODEL.FPN.IN_FEATURES: the body's stages the FPN reads (res2-res5; res3-res5 for
  // RetinaNet). fpn_top_block, FPN's extra levels above the last input: "maxpool" (P6 =
  // max-pool of P5, Mask R-CNN's) or "p6p7" (RetinaNet's LastLevelP6P7: P6 = 3x3/2 conv of
  // the body's res5, P7 = 3x3/2 conv of ReLU(P6)).
  std::vector<std::string> fpn_in_features = {"res2", "res3", "res4", "res5"};
  std::string fpn_top_block = "maxpool";
  // MODEL.RETINANET.* (Detectron2's defaults).
  int retinanet_num_convs = 4;
  std::array<double, 2> retinanet_iou_thresholds = {0.4, 0.5};  // [bg below, fg at or above]
  double retinanet_prior_prob = 0.01;
  double retinanet_score_thresh_test = 0.05;
  int retinanet_topk_candidates_test = 1000;
  double retinanet_nms_thresh_test = 0.5;
  std::array<double, 4> retinanet_bbox_reg_weights = {1.0, 1.0, 1.0, 1.0};
  double retinanet_focal_loss_gamma = 2.0;
  double retinanet_focal_loss_alpha = 0.25;
  double retinanet_smooth_l1_beta = 0.1;
  std::string retinanet_bbox_reg_loss_type = "smooth_l1";

  // Cascade R-CNN (MODEL.ROI_HEADS.NAME CascadeROIHeads): one box head and predictor per
  // stage, stage s trained on proposals matched at cascade_ious[s] and regressing with
  // cascade_bbox_reg_weights[s]; test scores are the stages' softmax scores averaged.
  std::vector<double> cascade_ious = {0.5, 0.6, 0.7};
  std::vector<std::array<double, 4>> cascade_bbox_reg_weights = {
      {10.0, 10.0, 5.0, 5.0}, {20.0, 20.0, 10.0, 10.0}, {30.0, 30.0, 15.0, 15.0}};
  // MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG: the box predictor regresses one box (4 outputs)
  // for all classes (true for Cascade R-CNN's stages).
  bool cls_agnostic_bbox_reg = false;

  // Keypoint R-CNN (MODEL.KEYPOINT_ON, MODEL.ROI_KEYPOINT_HEAD.*): Detectron2's
  // KRCNNConvDeconvUpsampleHead (convs of keypoint_conv_dims, a 4x4/2 deconvolution to
  // num_keypoints heatmaps, then x2 bilinear upsampling).
  bool keypoint_on = false;
  std::string keypoint_head = "KRCNNConvDeconvUpsampleHead";  // MODEL.ROI_KEYPOINT_HEAD.NAME
  int num_keypoints = 17;
  std::vector<int> keypoint_conv_dims = {512, 512, 512, 512, 512, 512, 512, 512};
  int keypoint_pooler_resolution = 14;
  int keypoint_pooler_sampling_ratio = 0;
  bool keypoint_pooler_aligned = true;
  // Training images with fewer visible keypoints than this are left out of the batch.
  int min_keypoints_per_image = 1;
  bool keypoint_normalize_by_visible = true;
  double keypoint_loss_weight = 1.0;

  bool detectron2() const { return convention == "detectron2"; }
  bool retinanet() const { return meta_architecture == "RetinaNet"; }
  bool cascade() const { return roi_heads_name == "CascadeROIHeads"; }
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
