// FrozenBatchNorm2d (torchvision.ops.FrozenBatchNorm2d) and GroupNorm2d, the norms by name, and
// the convolutions with a norm inside (declared in parts.h).
#include <torch/torch.h>

#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t channels, double eps) : eps_(eps) {
  weight_ = register_buffer("weight", torch::ones({channels}));
  bias_ = register_buffer("bias", torch::zeros({channels}));
  running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
  running_var_ = register_buffer("running_var", torch::ones({channels}));
}

std::pair<at::Tensor, at::Tensor> FrozenBatchNorm2d::ScaleShift() const {
  // Same operation order as torchvision.ops.FrozenBatchNorm2d.
  at::Tensor scale = weight_ * (running_var_ + eps_).rsqrt();
  at::Tensor shift = bias_ - running_mean_ * scale;
  return {scale, shift};
}

at::Tensor FrozenBatchNorm2d::forward(const at::Tensor& x) {
  auto [scale, shift] = ScaleShift();
  // In place on the fresh product: the same two operations in the same order (bit-equal
  // to x * scale + shift) with one full-size temporary fewer per layer.
  return (x * scale.reshape({1, -1, 1, 1})).add_(shift.reshape({1, -1, 1, 1}));
}

GroupNorm2d::GroupNorm2d(int64_t channels, int64_t groups) : groups_(groups) {
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
}

at::Tensor GroupNorm2d::forward(const at::Tensor& x) {
  return at::group_norm(x, groups_, weight_, bias_, 1e-5);
}

std::shared_ptr<NormLayer> MakeNormByName(const std::string& name, int64_t channels,
                                          double frozen_bn_eps) {
  if (name.empty())
    return nullptr;
  if (name == "GN")
    return std::make_shared<GroupNorm2d>(channels, 32);
  if (name == "BN")
    return std::make_shared<BatchNorm2d>(channels);
  if (name == "SyncBN")
    return std::make_shared<SyncBatchNorm2d>(channels);
  TORCH_CHECK(name == "FrozenBN", "norm \"", name,
              "\" is not built (ModelConfig::Validate admits \"\", FrozenBN, GN, BN, SyncBN)");
  return std::make_shared<FrozenBatchNorm2d>(channels, frozen_bn_eps);
}

NormedConv MakeNormedConv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                          const std::string& norm, double frozen_bn_eps) {
  NormedConv made;
  made.conv = MakeConv2d(in, out, k, stride, padding, /*bias=*/norm.empty());
  std::shared_ptr<NormLayer> layer = MakeNormByName(norm, out, frozen_bn_eps);
  if (layer)
    made.conv->register_module("norm", layer);
  made.fast = FastConv(made.conv, layer);
  return made;
}

}  // namespace mrcnn::model
