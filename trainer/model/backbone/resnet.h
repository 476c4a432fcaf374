#pragma once
// ResNet bodies (registered as resnet18, resnet50, resnet101 in BackboneRegistry).
#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::model {

// The channels of C2..C5 for the ResNet named `name` (what the neck's laterals take in).
std::vector<int64_t> ResNetChannels(const std::string& name);

}  // namespace mrcnn::model
