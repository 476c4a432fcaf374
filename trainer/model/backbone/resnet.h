#pragma once
// ResNet bodies (registered as resnet18, resnet50, resnet101 and detectron2_resnet in
// BackboneRegistry).
#include <cstdint>
#include <vector>

#include "trainer/model/config.h"

namespace mrcnn::model {

// The channels of the maps the config's body returns, finest first (C2..C5 for the
// torchvision ResNets; MODEL.RESNETS.OUT_FEATURES for Detectron2's): what the neck takes in.
std::vector<int64_t> ResNetChannels(const ModelConfig& config);

}  // namespace mrcnn::model
