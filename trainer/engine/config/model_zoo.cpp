#include "trainer/engine/config/model_zoo.h"

#include <array>
#include <utility>

#include "common/config_error.h"

namespace mrcnn::engine {
namespace {

constexpr std::string_view kInstanceSegmentation = "COCO-InstanceSegmentation/";

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

// Model-zoo file name (under COCO-InstanceSegmentation/) -> shipped config.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kShipped = {{
    {"mask_rcnn_R_50_FPN_1x.yaml", "mask_rcnn_R_50_FPN_1x.yaml"},
    {"mask_rcnn_R_50_FPN_3x.yaml", "mask_rcnn_R_50_FPN_3x.yaml"},
    {"mask_rcnn_R_101_FPN_1x.yaml", "mask_rcnn_R_101_FPN_1x.yaml"},
    {"mask_rcnn_R_101_FPN_3x.yaml", "mask_rcnn_R_101_FPN_3x.yaml"},
    {"mask_rcnn_R_50_FPN_1x_giou.yaml", "mask_rcnn_R_50_FPN_1x_giou.yaml"},
}};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Why a model-zoo config is out of reach, most specific reason first.
std::string WhyUnsupported(std::string_view name) {
  if (!name.starts_with(kInstanceSegmentation) && !name.starts_with("Misc/") &&
      !name.starts_with("Detectron1-Comparisons/") && !name.starts_with("new_baselines/")) {
    return "only COCO-format instance segmentation (Mask R-CNN) is implemented; detection-only, "
           "keypoint, panoptic, LVIS, Cityscapes and Pascal VOC models are not";
  }
  if (Contains(name, "cascade"))
    return "Cascade R-CNN heads are not implemented";
  if (Contains(name, "_C4_"))
    return "the C4 backbone (ResNet conv4 + res5 head) is not implemented";
  if (Contains(name, "_DC5_"))
    return "the DC5 (dilated conv5) backbone is not implemented";
  if (Contains(name, "X_101") || Contains(name, "X_152")) {
    return "ResNeXt backbones are not implemented";
  }
  if (Contains(name, "regnet"))
    return "RegNet backbones are not implemented";
  return "this variant (its norm, schedule or head) has no shipped equivalent";
}

}  // namespace

const std::vector<std::string>& SupportedModelZooNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [zoo, shipped] : kShipped) {
      v.push_back(std::string(kInstanceSegmentation) + std::string(zoo));
    }
    return v;
  }();
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
  if (name.starts_with(kInstanceSegmentation)) {
    const std::string_view file = name.substr(kInstanceSegmentation.size());
    for (const auto& [zoo, shipped] : kShipped) {
      if (file == zoo)
        return std::string(shipped);
    }
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
