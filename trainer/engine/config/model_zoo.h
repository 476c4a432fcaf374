#pragma once
// Detectron2 model-zoo config names, as detectron2-sagemaker users write the `config-file`
// hyperparameter ("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"), mapped to the
// equivalent config this project ships in configs/ under the same relative path. The shipped
// file keeps Detectron2's architecture, conventions and schedule (solver, steps,
// iterations); its MODEL.WEIGHTS names Detectron2's ImageNet backbone, which the job takes
// from the `weights` channel (trainer/engine/config/job_config.h, ResolveWeights).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::engine {

// The model-zoo names ModelZooConfig accepts, in the order an error message lists them.
const std::vector<std::string>& SupportedModelZooNames();

// The shipped config's file name (relative to the configs dir) for a model-zoo name we
// honour; nullopt when `name` is not a Detectron2 model-zoo name at all (then it is an
// ordinary file name). An optional "detectron2://" or "configs/" prefix is ignored. Throws
// common::ConfigError for hyperparameters.json's "config-file" when `name` is a model-zoo
// name we cannot honour (other Misc/ heads, panoptic, LVIS, Cityscapes, Pascal
// VOC, RPN-only models, RegNets, GN variants), saying why and listing the supported names.
std::optional<std::string> ModelZooConfig(std::string_view name);

}  // namespace mrcnn::engine
