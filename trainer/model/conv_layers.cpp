#include "trainer/model/conv_layers.h"

#include <torch/torch.h>

namespace mrcnn::model {
namespace nn = torch::nn;

nn::Conv2d MakeConv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                      bool bias) {
  nn::Conv2d conv(nn::Conv2dOptions(in, out, k).stride(stride).padding(padding).bias(bias));
  return conv;
}

void KaimingNormalFanOut(const nn::Conv2d& conv) {
  nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
  if (conv->bias.defined())
    nn::init::zeros_(conv->bias);
}

}  // namespace mrcnn::model
