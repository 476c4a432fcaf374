#include "trainer/engine/config/model_zoo.h"

#include <array>
#include <utility>

#include "common/config_error.h"

namespace mrcnn::engine {
namespace {

// Detectron2's config folders (configs/ in its repository, model_zoo.get_config_file's
// argument): a name under one of them is a model-zoo name.
constexpr std::array<std::string_view, 11> kModelZooFolders = {"COCO-InstanceSegmentation/",
                                                               "COCO-Detection/",
                                                               "COCO-Keypoints/",
                                                               "COCO-PanopticSegmentation/",
                                                               "LVISv0.5-InstanceSegmentation/",
                                                               "LVISv1-InstanceSegmentation/",
                                                               "Cityscapes/",
                                                               "PascalVOC-Detection/",
                                                               "Misc/",
                                                               "Detectron1-Comparisons/",
                                                               "new_baselines/"};

// The model-zoo names with a shipped config: the config dir holds each under the same
// relative path (configs/COCO-InstanceSegmentation/..., Detectron2's values in our keys).
constexpr std::string_view kShipped[] = {
    "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x_giou.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_1x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_X_101_32x8d_FPN_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_C4_1x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_C4_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_101_C4_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_DC5_1x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_50_DC5_3x.yaml",
    "COCO-InstanceSegmentation/mask_rcnn_R_101_DC5_3x.yaml",
    "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml",
    "COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml",
    "COCO-Detection/faster_rcnn_R_101_FPN_3x.yaml",
    "COCO-Detection/faster_rcnn_X_101_32x8d_FPN_3x.yaml",
    "COCO-Detection/faster_rcnn_R_50_C4_1x.yaml",
    "COCO-Detection/faster_rcnn_R_50_C4_3x.yaml",
    "COCO-Detection/faster_rcnn_R_101_C4_3x.yaml",
    "COCO-Detection/faster_rcnn_R_50_DC5_1x.yaml",
    "COCO-Detection/faster_rcnn_R_50_DC5_3x.yaml",
    "COCO-Detection/faster_rcnn_R_101_DC5_3x.yaml",
    "COCO-Detection/retinanet_R_50_FPN_1x.yaml",
    "COCO-Detection/retinanet_R_50_FPN_3x.yaml",
    "COCO-Detection/retinanet_R_101_FPN_3x.yaml",
    "COCO-Keypoints/keypoint_rcnn_R_50_FPN_1x.yaml",
    "COCO-Keypoints/keypoint_rcnn_R_50_FPN_3x.yaml",
    "COCO-Keypoints/keypoint_rcnn_R_101_FPN_3x.yaml",
    "COCO-Keypoints/keypoint_rcnn_X_101_32x8d_FPN_3x.yaml",
    "Misc/cascade_mask_rcnn_R_50_FPN_1x.yaml",
    "Misc/cascade_mask_rcnn_R_50_FPN_3x.yaml",
    "Misc/mask_rcnn_R_50_FPN_3x_gn.yaml",
    "Misc/scratch_mask_rcnn_R_50_FPN_3x_gn.yaml",
    "Misc/scratch_mask_rcnn_R_50_FPN_9x_gn.yaml",
    "Misc/mask_rcnn_R_50_FPN_1x_cls_agnostic.yaml",
    "Misc/mask_rcnn_R_50_FPN_1x_dconv_c3-c5.yaml",
    "Misc/mask_rcnn_R_50_FPN_3x_dconv_c3-c5.yaml",
    "Detectron1-Comparisons/faster_rcnn_R_50_FPN_noaug_1x.yaml",
    "Detectron1-Comparisons/mask_rcnn_R_50_FPN_noaug_1x.yaml",
    "Detectron1-Comparisons/keypoint_rcnn_R_50_FPN_1x.yaml",
};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Why a model-zoo config is out of reach, most specific reason first.
std::string WhyUnsupported(std::string_view name) {
  if (name.starts_with("Misc/") && !name.ends_with(".py")) {
    if (Contains(name, "panoptic") || Contains(name, "semantic"))
      return "panoptic and semantic segmentation heads are not implemented";
    if (Contains(name, "X_152"))
      return "ResNeXt-152 with deformable res3-res5 and GN cascade heads builds, but its narrow "
             "golden test does not yet reproduce Detectron2's detections (60-73% matched), so it "
             "is not offered";
    if (Contains(name, "_syncbn"))
      return "its TEST.PRECISE_BN (Detectron2's PreciseBN hook, which recomputes the BN statistics "
             "after training) is not implemented; SyncBN itself is (MODEL.*.NORM SyncBN in a config "
             "of your own)";
    return "this Misc/ variant (its heads or settings) has no shipped equivalent";
  }
  if (name.starts_with("COCO-PanopticSegmentation/"))
    return "panoptic segmentation (Panoptic FPN's semantic head) is not implemented";
  if (name.starts_with("LVISv0.5-InstanceSegmentation/") || name.starts_with("LVISv1-InstanceSegmentation/"))
    return "LVIS models (federated loss, 1203 classes) are not implemented";
  if (name.starts_with("Cityscapes/"))
    return "Cityscapes models are not implemented";
  if (name.starts_with("PascalVOC-Detection/"))
    return "Pascal VOC models are not implemented";
  if (Contains(name, "rpn_R_") || Contains(name, "fast_rcnn_"))
    return "proposal-only (RPN) and precomputed-proposal (Fast R-CNN) models are not implemented";
  if (Contains(name, "regnet"))
    return "RegNet backbones are not implemented";
  if (name.ends_with(".py"))
    return "LazyConfig (.py) files are not read; name the .yaml of the same model";
  return "this variant (its norm, schedule or head) has no shipped equivalent";
}

}  // namespace

const std::vector<std::string>& SupportedModelZooNames() {
  static const std::vector<std::string> names(std::begin(kShipped), std::end(kShipped));
  return names;
}

std::optional<std::string> ModelZooConfig(std::string_view name) {
  for (std::string_view prefix : {"detectron2://", "configs/"}) {
    if (name.starts_with(prefix))
      name.remove_prefix(prefix.size());
  }
  bool in_model_zoo = false;
  for (std::string_view folder : kModelZooFolders) {
    in_model_zoo = in_model_zoo || name.starts_with(folder);
  }
  if (!in_model_zoo)
    return std::nullopt;
  for (std::string_view shipped : kShipped) {
    if (name == shipped)
      return std::string(shipped);
  }
  std::string supported;
  for (const auto& n : SupportedModelZooNames()) {
    supported += (supported.empty() ? "" : ", ") + n;
  }
  throw common::ConfigError("hyperparameters", "config-file",
                            "names the Detectron2 model-zoo config \"" + std::string(name) +
                                "\", which this trainer cannot honour: " + WhyUnsupported(name) +
                                ". Supported model-zoo names: " + supported +
                                " (or a config file of your own in the code dir, through "
                                "local-config-file)");
}

}  // namespace mrcnn::engine
