#include "trainer/model/config.h"

#include "trainer/model/registry.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace mrcnn::model {
namespace {

// Walks MODEL.RPN.NMS_THRESH style paths; returns an undefined node when absent.
YAML::Node Lookup(const YAML::Node& root, const std::string& dotted) {
  // Node::operator= assigns content rather than rebinding, so walk with reset().
  YAML::Node node;
  node.reset(root);
  std::stringstream parts(dotted);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& const_node = node;
    YAML::Node child = const_node[part];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(child);
  }
  return node;
}

template <typename T>
void Read(const YAML::Node& root, const std::string& key, const std::string& source, T& out) {
  YAML::Node node = Lookup(root, key);
  if (!node.IsDefined() || node.IsNull()) return;
  try {
    out = node.as<T>();
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(source + ": key " + key + " has the wrong type (" + e.what() + ")");
  }
}

template <typename T, size_t N>
void ReadArray(const YAML::Node& root, const std::string& key, const std::string& source,
               std::array<T, N>& out) {
  std::vector<T> values;
  Read(root, key, source, values);
  if (values.empty()) return;
  if (values.size() != N) {
    throw std::runtime_error(source + ": key " + key + " needs " + std::to_string(N) + " values, got " +
                             std::to_string(values.size()));
  }
  for (size_t i = 0; i < N; ++i) out[i] = values[i];
}

void Require(bool ok, const std::string& source, const std::string& key, const std::string& why) {
  if (!ok) throw std::runtime_error(source + ": key " + key + " " + why);
}

template <typename T>
std::string Flow(const std::vector<T>& values) {
  std::ostringstream out;
  out.precision(12);
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << ']';
  return out.str();
}

std::string NestedFlow(const std::vector<std::vector<double>>& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + Flow(v[i]);
  return text + "]";
}

std::string BoolFlow(const std::vector<bool>& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += std::string(i ? ", " : "") + (v[i] ? "true" : "false");
  return text + "]";
}

// Detectron2's part names -> ours, and the keys only Detectron2's configs have. Keys of a
// Detectron2 config dump that are not read here are listed in trainer/model/README.md.
void ReadDetectron2(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  c.convention = "detectron2";
  const bool retinanet_backbone = c.backbone == "build_retinanet_resnet_fpn_backbone";
  c.neck = c.backbone == "build_resnet_fpn_backbone" || retinanet_backbone ? "fpn" : "none";
  c.backbone = "detectron2_resnet";
  if (retinanet_backbone) {
    // LastLevelP6P7 on res5 over an FPN of MODEL.FPN.IN_FEATURES (res3-res5).
    c.fpn_top_block = "p6p7";
    c.resnet_out_features = {"res3", "res4", "res5"};
    c.fpn_in_features = c.resnet_out_features;
  }
  Read(root, "MODEL.RESNETS.DEPTH", source, c.resnet_depth);
  Read(root, "MODEL.RESNETS.NUM_GROUPS", source, c.resnet_num_groups);
  Read(root, "MODEL.RESNETS.WIDTH_PER_GROUP", source, c.resnet_width_per_group);
  Read(root, "MODEL.RESNETS.STRIDE_IN_1X1", source, c.resnet_stride_in_1x1);
  Read(root, "MODEL.RESNETS.RES5_DILATION", source, c.resnet_res5_dilation);
  Read(root, "MODEL.RESNETS.STEM_OUT_CHANNELS", source, c.resnet_stem_out_channels);
  Read(root, "MODEL.RESNETS.RES2_OUT_CHANNELS", source, c.resnet_res2_out_channels);
  Read(root, "MODEL.RESNETS.DEFORM_ON_PER_STAGE", source, c.resnet_deform_on_per_stage);
  Read(root, "MODEL.RESNETS.DEFORM_MODULATED", source, c.resnet_deform_modulated);
  Read(root, "MODEL.RESNETS.DEFORM_NUM_GROUPS", source, c.resnet_deform_num_groups);
  Read(root, "MODEL.RESNETS.OUT_FEATURES", source, c.resnet_out_features);
  if (retinanet_backbone) {
    Read(root, "MODEL.FPN.IN_FEATURES", source, c.fpn_in_features);
    Require(c.fpn_in_features == c.resnet_out_features, source, "MODEL.FPN.IN_FEATURES",
            "must equal MODEL.RESNETS.OUT_FEATURES (the FPN reads every stage the body returns)");
  }
  Read(root, "MODEL.RESNETS.NORM", source, c.norm);
  // FREEZE_AT 2 (stem and res2 frozen) is torchvision's 3 trainable layers.
  if (!Lookup(root, "MODEL.BACKBONE.TRAINABLE_LAYERS").IsDefined()) {
    int freeze_at = 5 - c.trainable_layers;
    Read(root, "MODEL.BACKBONE.FREEZE_AT", source, freeze_at);
    Require(freeze_at >= 0 && freeze_at <= 5, source, "MODEL.BACKBONE.FREEZE_AT", "must be in 0..5");
    c.trainable_layers = 5 - freeze_at;
  }
  Read(root, "MODEL.ROI_HEADS.NAME", source, c.roi_heads_name);
  // Detectron2's box losses default to L1 (SMOOTH_L1_BETA 0), torchvision's to beta 1/9.
  for (auto [key, beta] : {std::pair<const char*, double*>{"MODEL.RPN.SMOOTH_L1_BETA", &c.rpn_smooth_l1_beta},
                           {"MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA", &c.box_smooth_l1_beta}}) {
    if (const YAML::Node node = Lookup(root, key); !node.IsDefined() || node.IsNull()) *beta = 0.0;
  }
  Read(root, "INPUT.FORMAT", source, c.input_format);
  Read(root, "MODEL.ANCHOR_GENERATOR.OFFSET", source, c.anchor_offset);
  Read(root, "MODEL.PROPOSAL_GENERATOR.MIN_SIZE", source, c.rpn_min_size);
  for (auto [key, aligned] : {std::pair<const char*, bool*>{"MODEL.ROI_BOX_HEAD.POOLER_TYPE", &c.box_pooler_aligned},
                              {"MODEL.ROI_MASK_HEAD.POOLER_TYPE", &c.mask_pooler_aligned}}) {
    std::string type = "ROIAlignV2";
    Read(root, key, source, type);
    Require(type == "ROIAlignV2" || type == "ROIAlign", source, key,
            "must be ROIAlignV2 or ROIAlign, got \"" + type + "\" (ROIPool and rotated boxes are not implemented)");
    *aligned = type == "ROIAlignV2";
  }
  // Detectron2 pads a batch to its backbone's size_divisibility: the FPN's coarsest stride
  // (32), and nothing for build_resnet_backbone (the batch's largest image, unpadded). Padding
  // a C4 or DC5 input would change the features near its right and bottom edges.
  c.size_divisibility = c.neck == "fpn" ? 32 : 1;
  if (c.rpn_head == "StandardRPNHead") c.rpn_head = "standard";
  if (c.retinanet()) {
    // No RPN and no ROI heads: Detectron2's dump still carries their defaults
    // (ROI_HEADS.NAME Res5ROIHeads among them), which do not apply.
    c.roi_heads_name = "StandardROIHeads";
    c.box_head = "two_mlp";
    c.mask_head = "four_conv";
    c.mask_on = false;
    return;
  }
  if (c.roi_heads_name == "Res5ROIHeads") {
    c.box_head = "res5";
    c.mask_head = "res5";
    return;
  }
  if (c.box_head == "FastRCNNConvFCHead") {
    // Two fcs and nothing else is torchvision's TwoMLPHead (its names, its bf16 path).
    c.box_head = c.box_num_conv == 0 && c.box_num_fc == 2 && c.box_head_norm.empty() ? "two_mlp" : "conv_fc";
  }
  if (c.mask_head == "MaskRCNNConvUpsampleHead") c.mask_head = "four_conv";
}

}  // namespace

std::vector<int64_t> ModelConfig::FeatureStrides() const {
  if (neck == "fpn" && fpn_top_block == "p6p7") {
    // The body's stages from the first FPN input, then P6 and P7.
    std::vector<int64_t> strides;
    for (const std::string& stage : fpn_in_features) strides.push_back(int64_t{1} << (stage.back() - '0'));
    strides.push_back(strides.back() * 2);
    strides.push_back(strides.back() * 2);
    return strides;
  }
  if (neck == "fpn") return {4, 8, 16, 32, 64};
  // C4: res4 (stride 16); DC5: res5 dilated instead of strided (16).
  const std::string& last = resnet_out_features.back();
  if (last == "res5" && resnet_res5_dilation == 1) return {32};
  if (last == "res3") return {8};
  if (last == "res2") return {4};
  return {16};
}

int64_t ModelConfig::FeatureChannels() const {
  if (neck == "fpn") return fpn_out_channels;
  return static_cast<int64_t>(resnet_res2_out_channels) << (resnet_out_features.back().back() - '2');
}

namespace {

// The backbone, the FPN, the RPN and its anchors.
void ReadBackboneAndRpn(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  Read(root, "MODEL.BACKBONE.NAME", source, c.backbone);
  Read(root, "MODEL.BACKBONE.NORM", source, c.norm);
  Read(root, "MODEL.BACKBONE.FROZEN_BN_EPS", source, c.frozen_bn_eps);
  Read(root, "MODEL.BACKBONE.TRAINABLE_LAYERS", source, c.trainable_layers);
  Read(root, "MODEL.NECK.NAME", source, c.neck);
  Read(root, "MODEL.FPN.OUT_CHANNELS", source, c.fpn_out_channels);
  Read(root, "MODEL.FPN.NORM", source, c.fpn_norm);
  Read(root, "MODEL.RPN.HEAD_NAME", source, c.rpn_head);
  Read(root, "MODEL.ANCHOR_GENERATOR.SIZES", source, c.anchor_sizes);
  Read(root, "MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS", source, c.anchor_aspect_ratios);
  Read(root, "MODEL.RPN.PRE_NMS_TOPK_TRAIN", source, c.rpn_pre_nms_top_n_train);
  Read(root, "MODEL.RPN.PRE_NMS_TOPK_TEST", source, c.rpn_pre_nms_top_n_test);
  Read(root, "MODEL.RPN.POST_NMS_TOPK_TRAIN", source, c.rpn_post_nms_top_n_train);
  Read(root, "MODEL.RPN.POST_NMS_TOPK_TEST", source, c.rpn_post_nms_top_n_test);
  Read(root, "MODEL.RPN.NMS_THRESH", source, c.rpn_nms_thresh);
  std::vector<double> rpn_iou;
  Read(root, "MODEL.RPN.IOU_THRESHOLDS", source, rpn_iou);
  if (!rpn_iou.empty()) {
    Require(rpn_iou.size() == 2, source, "MODEL.RPN.IOU_THRESHOLDS", "needs [bg, fg], e.g. [0.3, 0.7]");
    c.rpn_bg_iou_thresh = rpn_iou[0];
    c.rpn_fg_iou_thresh = rpn_iou[1];
  }
  Read(root, "MODEL.RPN.BATCH_SIZE_PER_IMAGE", source, c.rpn_batch_size_per_image);
  Read(root, "MODEL.RPN.POSITIVE_FRACTION", source, c.rpn_positive_fraction);
  Read(root, "MODEL.RPN.SCORE_THRESH", source, c.rpn_score_thresh);
  Read(root, "MODEL.RPN.MIN_SIZE", source, c.rpn_min_size);
  Read(root, "MODEL.RPN.BBOX_REG_LOSS_TYPE", source, c.rpn_bbox_reg_loss_type);
  Read(root, "MODEL.RPN.BBOX_REG_LOSS_WEIGHT", source, c.rpn_bbox_reg_loss_weight);
  Read(root, "MODEL.RPN.SMOOTH_L1_BETA", source, c.rpn_smooth_l1_beta);
  Read(root, "MODEL.RPN.LOSS_WEIGHT", source, c.rpn_loss_weight);
}

// A one-stage detector: its classes, thresholds and test limits are its own keys.
void ReadRetinaNet(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  Read(root, "MODEL.RETINANET.NUM_CLASSES", source, c.num_classes);
  Read(root, "MODEL.RETINANET.NUM_CONVS", source, c.retinanet_num_convs);
  ReadArray(root, "MODEL.RETINANET.IOU_THRESHOLDS", source, c.retinanet_iou_thresholds);
  std::vector<int> labels;
  Read(root, "MODEL.RETINANET.IOU_LABELS", source, labels);
  Require(labels.empty() || labels == std::vector<int>{0, -1, 1}, source, "MODEL.RETINANET.IOU_LABELS",
          "must be [0, -1, 1] (background, ignored, foreground: the zoo's)");
  Read(root, "MODEL.RETINANET.PRIOR_PROB", source, c.retinanet_prior_prob);
  Read(root, "MODEL.RETINANET.SCORE_THRESH_TEST", source, c.retinanet_score_thresh_test);
  Read(root, "MODEL.RETINANET.TOPK_CANDIDATES_TEST", source, c.retinanet_topk_candidates_test);
  Read(root, "MODEL.RETINANET.NMS_THRESH_TEST", source, c.retinanet_nms_thresh_test);
  ReadArray(root, "MODEL.RETINANET.BBOX_REG_WEIGHTS", source, c.retinanet_bbox_reg_weights);
  Read(root, "MODEL.RETINANET.FOCAL_LOSS_GAMMA", source, c.retinanet_focal_loss_gamma);
  Read(root, "MODEL.RETINANET.FOCAL_LOSS_ALPHA", source, c.retinanet_focal_loss_alpha);
  Read(root, "MODEL.RETINANET.SMOOTH_L1_LOSS_BETA", source, c.retinanet_smooth_l1_beta);
  Read(root, "MODEL.RETINANET.BBOX_REG_LOSS_TYPE", source, c.retinanet_bbox_reg_loss_type);
  std::string norm;
  Read(root, "MODEL.RETINANET.NORM", source, norm);
  Require(norm.empty(), source, "MODEL.RETINANET.NORM",
          "must be \"\" (the zoo's head has no norm; BN/GN heads are not implemented), got \"" + norm + "\"");
  std::vector<std::string> in_features;
  Read(root, "MODEL.RETINANET.IN_FEATURES", source, in_features);
  Require(in_features.empty() || in_features == std::vector<std::string>{"p3", "p4", "p5", "p6", "p7"}, source,
          "MODEL.RETINANET.IN_FEATURES", "must be [p3, p4, p5, p6, p7] (every FPN level, the zoo's)");
}

// The ROI heads' sampling and test thresholds and the box head.
void ReadRoiBoxHead(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  Read(root, "MODEL.ROI_HEADS.SCORE_THRESH_TEST", source, c.box_score_thresh);
  Read(root, "MODEL.ROI_HEADS.NMS_THRESH_TEST", source, c.box_nms_thresh);
  Read(root, "TEST.DETECTIONS_PER_IMAGE", source, c.detections_per_image);
  std::vector<double> roi_iou;
  Read(root, "MODEL.ROI_HEADS.IOU_THRESHOLDS", source, roi_iou);
  if (!roi_iou.empty()) {
    Require(roi_iou.size() == 1 || roi_iou.size() == 2, source, "MODEL.ROI_HEADS.IOU_THRESHOLDS",
            "needs [fg] or [bg, fg], e.g. [0.5]");
    c.box_bg_iou_thresh = roi_iou.front();
    c.box_fg_iou_thresh = roi_iou.back();
  }
  Read(root, "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE", source, c.box_batch_size_per_image);
  Read(root, "MODEL.ROI_HEADS.POSITIVE_FRACTION", source, c.box_positive_fraction);
  ReadArray(root, "MODEL.ROI_BOX_HEAD.BBOX_REG_WEIGHTS", source, c.bbox_reg_weights);
  Read(root, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE", source, c.bbox_reg_loss_type);
  Read(root, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_WEIGHT", source, c.bbox_reg_loss_weight);
  Read(root, "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA", source, c.box_smooth_l1_beta);
  Read(root, "MODEL.ROI_BOX_HEAD.NAME", source, c.box_head);
  Read(root, "MODEL.ROI_BOX_HEAD.FC_DIM", source, c.box_fc_dim);
  Read(root, "MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION", source, c.box_pooler_resolution);
  Read(root, "MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO", source, c.box_pooler_sampling_ratio);
  Read(root, "MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG", source, c.cls_agnostic_bbox_reg);
  Read(root, "MODEL.ROI_BOX_HEAD.NUM_CONV", source, c.box_num_conv);
  Read(root, "MODEL.ROI_BOX_HEAD.NUM_FC", source, c.box_num_fc);
  Read(root, "MODEL.ROI_BOX_HEAD.CONV_DIM", source, c.box_conv_dim);
  Read(root, "MODEL.ROI_BOX_HEAD.NORM", source, c.box_head_norm);
}

void ReadCascade(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  Read(root, "MODEL.ROI_BOX_CASCADE_HEAD.IOUS", source, c.cascade_ious);
  std::vector<std::vector<double>> weights;
  Read(root, "MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS", source, weights);
  if (!weights.empty()) {
    c.cascade_bbox_reg_weights.clear();
    for (const auto& w : weights) {
      Require(w.size() == 4, source, "MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS",
              "needs four weights (wx, wy, ww, wh) per stage, e.g. [[10, 10, 5, 5], [20, 20, 10, 10]]");
      c.cascade_bbox_reg_weights.push_back({w[0], w[1], w[2], w[3]});
    }
  }
}

void ReadMaskAndKeypoints(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  Read(root, "MODEL.MASK_ON", source, c.mask_on);
  Read(root, "MODEL.CHANNELS_LAST", source, c.channels_last);
  Read(root, "MODEL.ROI_MASK_HEAD.NAME", source, c.mask_head);
  Read(root, "MODEL.ROI_MASK_HEAD.CONV_DIM", source, c.mask_conv_dim);
  Read(root, "MODEL.ROI_MASK_HEAD.POOLER_RESOLUTION", source, c.mask_pooler_resolution);
  Read(root, "MODEL.ROI_MASK_HEAD.POOLER_SAMPLING_RATIO", source, c.mask_pooler_sampling_ratio);
  Read(root, "MODEL.ROI_MASK_HEAD.NUM_CONV", source, c.mask_num_conv);
  Read(root, "MODEL.ROI_MASK_HEAD.NORM", source, c.mask_head_norm);
  Read(root, "MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK", source, c.cls_agnostic_mask);
  Read(root, "MODEL.KEYPOINT_ON", source, c.keypoint_on);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.NAME", source, c.keypoint_head);
  {
    std::string pooler = "ROIAlignV2";
    Read(root, "MODEL.ROI_KEYPOINT_HEAD.POOLER_TYPE", source, pooler);
    Require(pooler == "ROIAlignV2" || pooler == "ROIAlign", source, "MODEL.ROI_KEYPOINT_HEAD.POOLER_TYPE",
            "must be ROIAlignV2 or ROIAlign, got \"" + pooler + "\"");
    c.keypoint_pooler_aligned = pooler == "ROIAlignV2";
  }
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS", source, c.num_keypoints);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.CONV_DIMS", source, c.keypoint_conv_dims);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.POOLER_RESOLUTION", source, c.keypoint_pooler_resolution);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.POOLER_SAMPLING_RATIO", source, c.keypoint_pooler_sampling_ratio);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.MIN_KEYPOINTS_PER_IMAGE", source, c.min_keypoints_per_image);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.NORMALIZE_LOSS_BY_VISIBLE_KEYPOINTS", source,
       c.keypoint_normalize_by_visible);
  Read(root, "MODEL.ROI_KEYPOINT_HEAD.LOSS_WEIGHT", source, c.keypoint_loss_weight);
}

// MODEL.PIXEL_MEAN/PIXEL_STD and INPUT.*.
void ReadInput(const YAML::Node& root, const std::string& source, ModelConfig& c) {
  ReadArray(root, "MODEL.PIXEL_MEAN", source, c.pixel_mean);
  ReadArray(root, "MODEL.PIXEL_STD", source, c.pixel_std);
  YAML::Node min_train = Lookup(root, "INPUT.MIN_SIZE_TRAIN");
  if (min_train.IsDefined() && min_train.IsScalar()) {
    int one = 0;
    Read(root, "INPUT.MIN_SIZE_TRAIN", source, one);
    c.min_size_train = {one};
  } else {
    Read(root, "INPUT.MIN_SIZE_TRAIN", source, c.min_size_train);
  }
  Read(root, "INPUT.MIN_SIZE_TRAIN_SAMPLING", source, c.min_size_train_sampling);
  Read(root, "INPUT.MAX_SIZE_TRAIN", source, c.max_size_train);
  Read(root, "INPUT.MIN_SIZE_TEST", source, c.min_size_test);
  Read(root, "INPUT.MAX_SIZE_TEST", source, c.max_size_test);
  Read(root, "INPUT.SIZE_DIVISIBILITY", source, c.size_divisibility);
}

}  // namespace

ModelConfig ModelConfig::FromYaml(const YAML::Node& root, const std::string& source) {
  ModelConfig c;
  ReadBackboneAndRpn(root, source, c);
  Read(root, "MODEL.ROI_HEADS.NAME", source, c.roi_heads_name);
  Read(root, "MODEL.ROI_HEADS.NUM_CLASSES", source, c.num_classes);
  Read(root, "MODEL.META_ARCHITECTURE", source, c.meta_architecture);
  Read(root, "MODEL.PROPOSAL_GENERATOR.NAME", source, c.proposal_generator);
  if (c.retinanet()) ReadRetinaNet(root, source, c);
  ReadRoiBoxHead(root, source, c);
  ReadCascade(root, source, c);
  ReadMaskAndKeypoints(root, source, c);
  ReadInput(root, source, c);
  // Our own model dirs write the convention's backbone name back (ToYaml), so both a
  // Detectron2 config and its round trip through ToYaml land here.
  if (c.backbone == "build_resnet_fpn_backbone" || c.backbone == "build_resnet_backbone" ||
      c.backbone == "build_retinanet_resnet_fpn_backbone") {
    ReadDetectron2(root, source, c);
  } else if (c.backbone == "detectron2_resnet") {
    throw std::runtime_error(source + ": key MODEL.BACKBONE.NAME: detectron2_resnet is internal; write "
                             "build_resnet_fpn_backbone or build_resnet_backbone");
  }
  c.Validate(source);
  return c;
}

ModelConfig ModelConfig::FromYamlFile(const std::filesystem::path& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path.string() + ": cannot read YAML config (" + e.what() + ")");
  }
  return FromYaml(root, path.string());
}

namespace {

// A NORM key's value: the get_norm names built here, or a refusal naming the ones Detectron2
// also accepts.
void RequireBuiltNorm(const std::string& norm, bool allow_none, const std::string& source, const char* key) {
  const bool built = norm == "FrozenBN" || norm == "GN" || norm == "BN" || norm == "SyncBN" ||
                     (allow_none && norm.empty());
  const std::string what = allow_none ? "\"\" (none), FrozenBN, GN, BN or SyncBN" : "FrozenBN, GN, BN or SyncBN";
  Require(built, source, key,
          "is \"" + norm + "\": the norms built are " + what +
              (norm == "nnSyncBN" || norm == "naiveSyncBN" || norm.starts_with("naiveSyncBN_") || norm == "LN"
                   ? " (Detectron2's " + norm + " is not implemented; SyncBN computes the same statistics)"
                   : ""));
}

// Counts, ranges and names that hold for every model.
void ValidateGeneral(const ModelConfig& c, const std::string& source) {
  Require(c.num_classes >= 1, source, "MODEL.ROI_HEADS.NUM_CLASSES", "must be >= 1 (foreground classes)");
  RequireBuiltNorm(c.norm, false, source, c.detectron2() ? "MODEL.RESNETS.NORM" : "MODEL.BACKBONE.NORM");
  Require(c.trainable_layers >= 0 && c.trainable_layers <= 5, source, "MODEL.BACKBONE.TRAINABLE_LAYERS",
          "must be in 0..5");
  Require(!c.anchor_sizes.empty(), source, "MODEL.ANCHOR_GENERATOR.SIZES", "must list one entry per level");
  Require(c.anchor_aspect_ratios.size() == 1 || c.anchor_aspect_ratios.size() == c.anchor_sizes.size(), source,
          "MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS", "must have one entry or one per level of SIZES");
  for (const auto& [key, v] : {std::pair<const char*, double>{"MODEL.RPN.NMS_THRESH", c.rpn_nms_thresh},
                               {"MODEL.RPN.POSITIVE_FRACTION", c.rpn_positive_fraction},
                               {"MODEL.ROI_HEADS.NMS_THRESH_TEST", c.box_nms_thresh},
                               {"MODEL.ROI_HEADS.SCORE_THRESH_TEST", c.box_score_thresh},
                               {"MODEL.ROI_HEADS.POSITIVE_FRACTION", c.box_positive_fraction}}) {
    Require(v >= 0.0 && v <= 1.0, source, key, "must be in [0, 1]");
  }
  Require(c.rpn_bg_iou_thresh <= c.rpn_fg_iou_thresh, source, "MODEL.RPN.IOU_THRESHOLDS", "needs bg <= fg");
  Require(c.box_bg_iou_thresh <= c.box_fg_iou_thresh, source, "MODEL.ROI_HEADS.IOU_THRESHOLDS", "needs bg <= fg");
  Require(c.min_size_test > 0 && c.max_size_test > 0, source, "INPUT.MIN_SIZE_TEST/MAX_SIZE_TEST", "must be > 0");
  Require(!c.min_size_train.empty(), source, "INPUT.MIN_SIZE_TRAIN", "must not be empty");
  for (int size : c.min_size_train) Require(size > 0, source, "INPUT.MIN_SIZE_TRAIN", "must hold sizes > 0");
  Require(c.min_size_train_sampling == "choice" || c.min_size_train_sampling == "range", source,
          "INPUT.MIN_SIZE_TRAIN_SAMPLING",
          "must be choice (one of INPUT.MIN_SIZE_TRAIN) or range (a size within its two bounds), got \"" +
              c.min_size_train_sampling + "\"");
  Require(c.min_size_train_sampling != "range" ||
              (c.min_size_train.size() == 2 && c.min_size_train[0] <= c.min_size_train[1]),
          source, "INPUT.MIN_SIZE_TRAIN", "must be [low, high] with low <= high when INPUT.MIN_SIZE_TRAIN_SAMPLING is range");
  Require(c.size_divisibility >= 1, source, "INPUT.SIZE_DIVISIBILITY", "must be >= 1");
  for (double s : c.pixel_std) Require(s > 0, source, "MODEL.PIXEL_STD", "must be > 0");
  Require(c.detections_per_image >= 1, source, "TEST.DETECTIONS_PER_IMAGE", "must be >= 1");
  for (const auto& [key, v] : {std::pair<const char*, const std::string&>{"MODEL.RPN.BBOX_REG_LOSS_TYPE",
                                                                          c.rpn_bbox_reg_loss_type},
                               {"MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE", c.bbox_reg_loss_type}}) {
    Require(v == "smooth_l1" || v == "giou" || v == "diou" || v == "ciou", source, key,
            "must be smooth_l1, giou, diou or ciou, got \"" + v + "\"");
  }
  Require(c.rpn_smooth_l1_beta >= 0, source, "MODEL.RPN.SMOOTH_L1_BETA", "must be >= 0 (0: L1)");
  Require(c.box_smooth_l1_beta >= 0, source, "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA", "must be >= 0 (0: L1)");
  Require(c.rpn_loss_weight >= 0, source, "MODEL.RPN.LOSS_WEIGHT", "must be >= 0");
  Require(c.rpn_bbox_reg_loss_weight >= 0, source, "MODEL.RPN.BBOX_REG_LOSS_WEIGHT", "must be >= 0");
  Require(c.bbox_reg_loss_weight >= 0, source, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_WEIGHT", "must be >= 0");
  for (double w : c.bbox_reg_weights) Require(w > 0, source, "MODEL.ROI_BOX_HEAD.BBOX_REG_WEIGHTS", "must be > 0");
  Require(c.convention == "torchvision" || c.convention == "detectron2", source, "MODEL.BACKBONE.NAME",
          "selects the torchvision or the detectron2 convention, got \"" + c.convention + "\"");
  Require(c.input_format == "RGB" || c.input_format == "BGR", source, "INPUT.FORMAT",
          "must be RGB or BGR, got \"" + c.input_format + "\"");
}

// The FPN's and the ROI heads' layer counts and norms.
void ValidateHeads(const ModelConfig& c, const std::string& source) {
  RequireBuiltNorm(c.fpn_norm, true, source, "MODEL.FPN.NORM");
  RequireBuiltNorm(c.box_head_norm, true, source, "MODEL.ROI_BOX_HEAD.NORM");
  RequireBuiltNorm(c.mask_head_norm, true, source, "MODEL.ROI_MASK_HEAD.NORM");
  // Res5ROIHeads' box head is res5 (Detectron2 dumps NUM_CONV 0, NUM_FC 0 there, unused).
  Require(c.box_head == "res5" ||
              (c.box_num_conv >= 0 && c.box_num_fc >= 0 && c.box_num_conv + c.box_num_fc >= 1),
          source, "MODEL.ROI_BOX_HEAD.NUM_CONV/NUM_FC", "must be >= 0 each, with at least one layer in all");
  Require(c.box_conv_dim >= 1 && c.box_fc_dim >= 1, source, "MODEL.ROI_BOX_HEAD.CONV_DIM/FC_DIM", "must be >= 1");
  Require(c.box_head != "two_mlp" || (c.box_num_conv == 0 && c.box_num_fc == 2 && c.box_head_norm.empty()), source,
          "MODEL.ROI_BOX_HEAD.NAME",
          "two_mlp is two fcs without a norm (NUM_CONV 0, NUM_FC 2, NORM \"\"); other layer counts or a norm are "
          "conv_fc (Detectron2's FastRCNNConvFCHead)");
  Require(c.mask_num_conv >= 0, source, "MODEL.ROI_MASK_HEAD.NUM_CONV", "must be >= 0");
  Require(c.mask_conv_dim >= 1, source, "MODEL.ROI_MASK_HEAD.CONV_DIM", "must be >= 1");
  Require(c.neck == "fpn" || c.fpn_norm.empty(), source, "MODEL.FPN.NORM", "needs an FPN (MODEL.NECK.NAME fpn)");
}

void ValidateCascade(const ModelConfig& c, const std::string& source) {
  Require(!c.cascade_ious.empty() && c.cascade_ious.size() == c.cascade_bbox_reg_weights.size(), source,
          "MODEL.ROI_BOX_CASCADE_HEAD.IOUS",
          "needs one IoU per stage, as many as ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS has rows");
  for (double iou : c.cascade_ious)
    Require(iou > 0.0 && iou <= 1.0, source, "MODEL.ROI_BOX_CASCADE_HEAD.IOUS", "must be in (0, 1]");
  for (const auto& w : c.cascade_bbox_reg_weights)
    for (double v : w)
      Require(v > 0, source, "MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS", "must be > 0");
  Require(c.box_fg_iou_thresh == c.cascade_ious.front(), source, "MODEL.ROI_BOX_CASCADE_HEAD.IOUS",
          "must start with MODEL.ROI_HEADS.IOU_THRESHOLDS' foreground IoU (stage 0 trains on the "
          "standard sampler's proposals)");
  Require(c.cls_agnostic_bbox_reg, source, "MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG",
          "must be true with CascadeROIHeads (each stage refines one box per proposal, as Detectron2's)");
  Require(c.box_head == "two_mlp" || c.box_head == "conv_fc", source, "MODEL.ROI_BOX_HEAD.NAME",
          "must be FastRCNNConvFCHead (two_mlp or conv_fc) with CascadeROIHeads, got \"" + c.box_head + "\"");
}

void ValidateKeypoints(const ModelConfig& c, const std::string& source) {
  Require(c.num_keypoints >= 1, source, "MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS", "must be >= 1");
  Require(!c.keypoint_conv_dims.empty(), source, "MODEL.ROI_KEYPOINT_HEAD.CONV_DIMS",
          "must list at least one convolution's channels");
  for (int d : c.keypoint_conv_dims)
    Require(d >= 1, source, "MODEL.ROI_KEYPOINT_HEAD.CONV_DIMS", "must be >= 1 each");
  Require(c.keypoint_pooler_resolution >= 1, source, "MODEL.ROI_KEYPOINT_HEAD.POOLER_RESOLUTION",
          "must be >= 1");
  Require(c.keypoint_loss_weight >= 0, source, "MODEL.ROI_KEYPOINT_HEAD.LOSS_WEIGHT", "must be >= 0");
  Require(c.roi_heads_name != "Res5ROIHeads", source, "MODEL.KEYPOINT_ON",
          "needs StandardROIHeads (an FPN model): the zoo has no C4 keypoint model");
}

void ValidateRetinaNet(const ModelConfig& c, const std::string& source) {
  Require(c.detectron2() && c.fpn_top_block == "p6p7", source, "MODEL.BACKBONE.NAME",
          "must be build_retinanet_resnet_fpn_backbone with META_ARCHITECTURE RetinaNet");
  Require(!c.mask_on && !c.keypoint_on, source, "MODEL.MASK_ON",
          "must be false with RetinaNet (box-only), and so must MODEL.KEYPOINT_ON");
  Require(c.retinanet_iou_thresholds[0] <= c.retinanet_iou_thresholds[1], source, "MODEL.RETINANET.IOU_THRESHOLDS",
          "needs [background below, foreground at or above], the first <= the second");
  Require(c.retinanet_prior_prob > 0 && c.retinanet_prior_prob < 1, source, "MODEL.RETINANET.PRIOR_PROB",
          "must be in (0, 1)");
  Require(c.retinanet_num_convs >= 0, source, "MODEL.RETINANET.NUM_CONVS", "must be >= 0");
  Require(c.retinanet_topk_candidates_test >= 1, source, "MODEL.RETINANET.TOPK_CANDIDATES_TEST", "must be >= 1");
  Require(c.retinanet_bbox_reg_loss_type == "smooth_l1", source, "MODEL.RETINANET.BBOX_REG_LOSS_TYPE",
          "must be smooth_l1 (the zoo's; giou/diou/ciou are not implemented for RetinaNet)");
  Require(c.anchor_sizes.size() == 5, source, "MODEL.ANCHOR_GENERATOR.SIZES",
          "needs one entry per level P3-P7 (5) for RetinaNet");
}

// Detectron2's ResNet body and the stages it returns.
void ValidateDetectron2ResNet(const ModelConfig& c, const std::string& source) {
  Require(c.resnet_depth == 50 || c.resnet_depth == 101 || c.resnet_depth == 152, source, "MODEL.RESNETS.DEPTH",
          "must be 50, 101 or 152 (bottleneck ResNets), got " + std::to_string(c.resnet_depth));
  Require(c.resnet_num_groups >= 1 && c.resnet_width_per_group >= 1 && c.resnet_stem_out_channels >= 1 &&
              c.resnet_res2_out_channels >= 1,
          source, "MODEL.RESNETS", "NUM_GROUPS, WIDTH_PER_GROUP, STEM_OUT_CHANNELS and RES2_OUT_CHANNELS must be >= 1");
  Require(c.resnet_deform_on_per_stage.size() == 4, source, "MODEL.RESNETS.DEFORM_ON_PER_STAGE",
          "needs four entries, one per stage res2..res5");
  Require(c.resnet_deform_num_groups >= 1 &&
              (c.resnet_width_per_group * c.resnet_num_groups) % c.resnet_deform_num_groups == 0,
          source, "MODEL.RESNETS.DEFORM_NUM_GROUPS",
          "must be >= 1 and divide the bottleneck's channels (NUM_GROUPS x WIDTH_PER_GROUP)");
  Require(!(c.roi_heads_name == "Res5ROIHeads" && c.resnet_deform_on_per_stage[3]), source,
          "MODEL.RESNETS.DEFORM_ON_PER_STAGE",
          "res5 is on, but with Res5ROIHeads res5 is the box head's, where Detectron2 has no deformable "
          "convolution either");
  Require(c.resnet_res5_dilation == 1 || c.resnet_res5_dilation == 2, source, "MODEL.RESNETS.RES5_DILATION",
          "must be 1 or 2");
  static const std::vector<std::string> kStages = {"res2", "res3", "res4", "res5"};
  if (c.neck == "fpn" && c.fpn_top_block == "p6p7") {
    Require(c.resnet_out_features == std::vector<std::string>{"res3", "res4", "res5"}, source,
            "MODEL.RESNETS.OUT_FEATURES", "must be [res3, res4, res5] with build_retinanet_resnet_fpn_backbone");
    Require(c.resnet_res5_dilation == 1, source, "MODEL.RESNETS.RES5_DILATION", "must be 1 with an FPN");
  } else if (c.neck == "fpn") {
    Require(c.resnet_out_features == kStages, source, "MODEL.RESNETS.OUT_FEATURES",
            "must be [res2, res3, res4, res5] with build_resnet_fpn_backbone");
    Require(c.resnet_res5_dilation == 1, source, "MODEL.RESNETS.RES5_DILATION", "must be 1 with an FPN");
  } else {
    Require(c.resnet_out_features.size() == 1 &&
                std::find(kStages.begin(), kStages.end(), c.resnet_out_features.front()) != kStages.end(),
            source, "MODEL.RESNETS.OUT_FEATURES",
            "must name one stage with build_resnet_backbone: [res4] (C4) or [res5] (DC5)");
  }
  if (c.roi_heads_name == "Res5ROIHeads") {
    Require(c.neck == "none" && c.resnet_out_features.front() == "res4", source, "MODEL.ROI_HEADS.NAME",
            "Res5ROIHeads needs build_resnet_backbone with OUT_FEATURES [res4] (the C4 layout)");
  }
  Require(c.resnet_res5_dilation == 1 || c.resnet_out_features.back() == "res5", source, "MODEL.RESNETS.RES5_DILATION",
          "2 needs res5 in OUT_FEATURES (DC5)");
}

}  // namespace

void ModelConfig::Validate(const std::string& source) const {
  ValidateGeneral(*this, source);
  // The choices Detectron2 makes by registry, checked against ours (registry.h): an unknown
  // name fails here, naming the key and the registered names, before any module is built.
  MetaArchRegistry().Check(meta_architecture, source);
  ProposalGeneratorRegistry().Check(proposal_generator, source);
  RoiHeadsRegistry().Check(roi_heads_name, source);
  if (!retinanet()) ValidateHeads(*this, source);
  if (cascade()) ValidateCascade(*this, source);
  if (keypoint_on) {
    KeypointHeadRegistry().Check(keypoint_head, source);
    ValidateKeypoints(*this, source);
  }
  Require(fpn_top_block == "maxpool" || fpn_top_block == "p6p7", source, "MODEL.BACKBONE.NAME",
          "FPN top block must be maxpool or p6p7");
  if (retinanet()) ValidateRetinaNet(*this, source);
  if (!detectron2()) {
    Require(roi_heads_name != "Res5ROIHeads", source, "MODEL.ROI_HEADS.NAME",
            "Res5ROIHeads needs MODEL.BACKBONE.NAME build_resnet_backbone (Detectron2's C4 layout)");
    return;
  }
  ValidateDetectron2ResNet(*this, source);
}

std::string ModelConfig::ToYaml() const {
  std::ostringstream o;
  o.precision(12);
  auto arr = [](const auto& a) { return Flow(std::vector<double>(a.begin(), a.end())); };
  const std::string backbone_name =
      !detectron2()                ? backbone
      : fpn_top_block == "p6p7"    ? "build_retinanet_resnet_fpn_backbone"
      : neck == "fpn"              ? "build_resnet_fpn_backbone"
                                   : "build_resnet_backbone";
  auto pooler = [](bool aligned) { return aligned ? "ROIAlignV2" : "ROIAlign"; };
  o << "MODEL:\n"
    << "  META_ARCHITECTURE: " << meta_architecture << "\n"
    << "  RETINANET: {NUM_CLASSES: " << num_classes << ", NUM_CONVS: " << retinanet_num_convs
    << ", IOU_THRESHOLDS: " << arr(retinanet_iou_thresholds) << ", PRIOR_PROB: " << retinanet_prior_prob
    << ", SCORE_THRESH_TEST: " << retinanet_score_thresh_test
    << ", TOPK_CANDIDATES_TEST: " << retinanet_topk_candidates_test
    << ", NMS_THRESH_TEST: " << retinanet_nms_thresh_test << ", BBOX_REG_WEIGHTS: " << arr(retinanet_bbox_reg_weights)
    << ", FOCAL_LOSS_GAMMA: " << retinanet_focal_loss_gamma << ", FOCAL_LOSS_ALPHA: " << retinanet_focal_loss_alpha
    << ", SMOOTH_L1_LOSS_BETA: " << retinanet_smooth_l1_beta
    << ", BBOX_REG_LOSS_TYPE: " << retinanet_bbox_reg_loss_type << "}\n"
    << "  RESNETS: {DEPTH: " << resnet_depth << ", NUM_GROUPS: " << resnet_num_groups
    << ", WIDTH_PER_GROUP: " << resnet_width_per_group << ", STRIDE_IN_1X1: " << (resnet_stride_in_1x1 ? "true" : "false")
    << ", RES5_DILATION: " << resnet_res5_dilation << ", STEM_OUT_CHANNELS: " << resnet_stem_out_channels
    << ", RES2_OUT_CHANNELS: " << resnet_res2_out_channels << ", OUT_FEATURES: " << Flow(resnet_out_features)
    << ", DEFORM_ON_PER_STAGE: " << BoolFlow(resnet_deform_on_per_stage)
    << ", DEFORM_MODULATED: " << (resnet_deform_modulated ? "true" : "false")
    << ", DEFORM_NUM_GROUPS: " << resnet_deform_num_groups
    << ", NORM: " << norm << "}\n"
    << "  PROPOSAL_GENERATOR: {NAME: " << proposal_generator << ", MIN_SIZE: " << rpn_min_size << "}\n"
    << "  BACKBONE: {NAME: " << backbone_name << ", NORM: " << norm << ", FROZEN_BN_EPS: " << frozen_bn_eps
    << ", TRAINABLE_LAYERS: " << trainable_layers << "}\n"
    << "  NECK: {NAME: " << neck << "}\n"
    << "  FPN: {OUT_CHANNELS: " << fpn_out_channels << ", IN_FEATURES: " << Flow(fpn_in_features)
    << ", NORM: \"" << fpn_norm << "\"}\n"
    << "  ANCHOR_GENERATOR: {SIZES: " << NestedFlow(anchor_sizes) << ", ASPECT_RATIOS: " << NestedFlow(anchor_aspect_ratios)
    << ", OFFSET: " << anchor_offset << "}\n"
    << "  RPN: {HEAD_NAME: " << rpn_head << ", PRE_NMS_TOPK_TRAIN: " << rpn_pre_nms_top_n_train
    << ", PRE_NMS_TOPK_TEST: " << rpn_pre_nms_top_n_test << ", POST_NMS_TOPK_TRAIN: " << rpn_post_nms_top_n_train
    << ", POST_NMS_TOPK_TEST: " << rpn_post_nms_top_n_test << ", NMS_THRESH: " << rpn_nms_thresh
    << ", IOU_THRESHOLDS: [" << rpn_bg_iou_thresh << ", " << rpn_fg_iou_thresh
    << "], BATCH_SIZE_PER_IMAGE: " << rpn_batch_size_per_image << ", POSITIVE_FRACTION: " << rpn_positive_fraction
    << ", SCORE_THRESH: " << rpn_score_thresh << ", MIN_SIZE: " << rpn_min_size
    << ", BBOX_REG_LOSS_TYPE: " << rpn_bbox_reg_loss_type << ", BBOX_REG_LOSS_WEIGHT: " << rpn_bbox_reg_loss_weight
    << ", SMOOTH_L1_BETA: " << rpn_smooth_l1_beta << ", LOSS_WEIGHT: " << rpn_loss_weight << "}\n"
    << "  ROI_HEADS: {NAME: " << roi_heads_name << ", NUM_CLASSES: " << num_classes << ", SCORE_THRESH_TEST: " << box_score_thresh
    << ", NMS_THRESH_TEST: " << box_nms_thresh << ", IOU_THRESHOLDS: [" << box_bg_iou_thresh << ", "
    << box_fg_iou_thresh << "], BATCH_SIZE_PER_IMAGE: " << box_batch_size_per_image
    << ", POSITIVE_FRACTION: " << box_positive_fraction << "}\n"
    << "  ROI_BOX_HEAD: {NAME: " << box_head << ", FC_DIM: " << box_fc_dim << ", NUM_FC: " << box_num_fc
    << ", NUM_CONV: " << box_num_conv << ", CONV_DIM: " << box_conv_dim << ", NORM: \"" << box_head_norm << "\""
    << ", POOLER_RESOLUTION: " << box_pooler_resolution << ", POOLER_SAMPLING_RATIO: " << box_pooler_sampling_ratio
    << ", POOLER_TYPE: " << pooler(box_pooler_aligned)
    << ", BBOX_REG_WEIGHTS: " << arr(bbox_reg_weights)
    << ", BBOX_REG_LOSS_TYPE: " << bbox_reg_loss_type << ", BBOX_REG_LOSS_WEIGHT: " << bbox_reg_loss_weight
    << ", SMOOTH_L1_BETA: " << box_smooth_l1_beta
    << ", CLS_AGNOSTIC_BBOX_REG: " << (cls_agnostic_bbox_reg ? "true" : "false") << "}\n"
    << "  ROI_BOX_CASCADE_HEAD: {IOUS: " << Flow(cascade_ious) << ", BBOX_REG_WEIGHTS: ["
    << [&] {
         std::string rows;
         for (size_t i = 0; i < cascade_bbox_reg_weights.size(); ++i)
           rows += (i ? ", " : "") + arr(cascade_bbox_reg_weights[i]);
         return rows;
       }()
    << "]}\n"
    << "  MASK_ON: " << (mask_on ? "true" : "false") << "\n"
    << "  CHANNELS_LAST: " << (channels_last ? "true" : "false") << "\n"
    << "  ROI_MASK_HEAD: {NAME: " << mask_head << ", CONV_DIM: " << mask_conv_dim << ", NUM_CONV: " << mask_num_conv
    << ", NORM: \"" << mask_head_norm << "\", CLS_AGNOSTIC_MASK: " << (cls_agnostic_mask ? "true" : "false")
    << ", POOLER_RESOLUTION: " << mask_pooler_resolution
    << ", POOLER_SAMPLING_RATIO: " << mask_pooler_sampling_ratio << ", POOLER_TYPE: " << pooler(mask_pooler_aligned)
    << "}\n"
    << "  KEYPOINT_ON: " << (keypoint_on ? "true" : "false") << "\n"
    << "  ROI_KEYPOINT_HEAD: {NAME: " << keypoint_head << ", NUM_KEYPOINTS: " << num_keypoints
    << ", CONV_DIMS: " << Flow(keypoint_conv_dims) << ", POOLER_RESOLUTION: " << keypoint_pooler_resolution
    << ", POOLER_SAMPLING_RATIO: " << keypoint_pooler_sampling_ratio
    << ", POOLER_TYPE: " << pooler(keypoint_pooler_aligned) << ", MIN_KEYPOINTS_PER_IMAGE: " << min_keypoints_per_image
    << ", NORMALIZE_LOSS_BY_VISIBLE_KEYPOINTS: " << (keypoint_normalize_by_visible ? "true" : "false")
    << ", LOSS_WEIGHT: " << keypoint_loss_weight << "}\n"
    << "  PIXEL_MEAN: " << arr(pixel_mean) << "\n"
    << "  PIXEL_STD: " << arr(pixel_std) << "\n"
    << "INPUT: {MIN_SIZE_TRAIN: " << Flow(min_size_train)
    << ", MIN_SIZE_TRAIN_SAMPLING: " << min_size_train_sampling << ", MAX_SIZE_TRAIN: " << max_size_train
    << ", MIN_SIZE_TEST: " << min_size_test << ", MAX_SIZE_TEST: " << max_size_test
    << ", SIZE_DIVISIBILITY: " << size_divisibility << ", FORMAT: " << input_format << "}\n"
    << "TEST: {DETECTIONS_PER_IMAGE: " << detections_per_image << "}\n";
  return o.str();
}

}  // namespace mrcnn::model
