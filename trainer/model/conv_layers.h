#pragma once
// Convolution layers as torchvision's parts build them, for the parts of every room
// (backbone/, rpn/, roi_heads/).
#include <torch/nn/modules/conv.h>

#include <cstdint>

namespace mrcnn::model {

// A Conv2d with a square kernel, the given stride and padding, and a bias when asked.
torch::nn::Conv2d MakeConv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                             bool bias);

// kaiming_normal_(mode="fan_out", nonlinearity="relu") on the weight, zeros on the bias:
// torchvision's initialisation of ResNet's and the mask head's convolutions.
void KaimingNormalFanOut(const torch::nn::Conv2d& conv);

}  // namespace mrcnn::model
