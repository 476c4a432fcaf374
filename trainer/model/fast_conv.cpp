#include "trainer/model/fast_conv.h"

#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>

#include "kernels/ops.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace {

// Which Winograd tile a convolution over n images of h×w runs with. Fewer multiplications
// (F(6×6) 5.1×, F(4×4) 4×, F(2×2) 2.25× fewer than direct) only pay while the GEMMs have
// enough tiles to run at full speed and the tiles are not mostly padding; on the 2-core
// AVX2 VM (bench/kernels/bench_winograd.py, one thread) F(6×6) wins from about 128 tiles
// of 6×6 (the mask head's 100 RoIs of 14×14, P2, P3, layer1, layer2), F(2×2) below 32
// tiles of 4×4 (15×20 maps: layer4, P5), F(4×4) in between (layer3, P4).
int64_t TileFor(int64_t n, int64_t h, int64_t w) {
  auto tiles = [&](int64_t m) { return n * ((h + m - 1) / m) * ((w + m - 1) / m); };
  if (tiles(6) >= 128)
    return 6;
  if (tiles(4) >= 32)
    return 4;
  return 2;
}

bool CpuWinogradEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("MRCNN_CPU_WINOGRAD");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

int64_t VersionOf(const at::Tensor& t) {
  // Inference tensors carry no version counter; they cannot change outside inference mode.
  return t.is_inference() ? 0 : static_cast<int64_t>(t._version());
}

}  // namespace

bool CpuInferenceFastPath(const at::Tensor& x) {
  return CpuWinogradEnabled() && !c10::GradMode::is_enabled() && x.is_cpu() && x.dim() == 4 &&
         x.scalar_type() == at::kFloat && !at::autocast::is_autocast_enabled(at::kCPU);
}

FastConv::FastConv(torch::nn::Conv2d conv, std::shared_ptr<NormLayer> norm)
    : conv_(std::move(conv)), norm_(std::move(norm)) {
  frozen_ = dynamic_cast<FrozenBatchNorm2d*>(norm_.get());
  const auto& o = conv_->options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  fast_ok_ =
      padding != nullptr && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  winograd_ok_ = fast_ok_ && (*o.kernel_size())[0] == 3 && (*o.kernel_size())[1] == 3 &&
                 (*o.stride())[0] == 1 && (*o.stride())[1] == 1 && (*o.dilation())[0] == 1 &&
                 (*o.dilation())[1] == 1 && o.groups() == 1 && (**padding)[0] == 1 &&
                 (**padding)[1] == 1;
}

at::Tensor FastConv::Modules(const at::Tensor& x, bool relu) {
  at::Tensor y = conv_->forward(x);
  if (norm_)
    y = norm_->forward(y);
  return relu ? y.relu_() : y;
}

std::vector<at::Tensor> FastConv::Sources() const {
  std::vector<at::Tensor> sources{conv_->weight};
  if (conv_->bias.defined())
    sources.push_back(conv_->bias);
  if (frozen_ != nullptr)
    for (at::Tensor& buffer : frozen_->Buffers())
      sources.push_back(std::move(buffer));
  return sources;
}

void FastConv::Refresh() {
  const std::vector<at::Tensor> sources = Sources();
  std::vector<std::pair<const void*, int64_t>> key;
  key.reserve(sources.size());
  for (const at::Tensor& t : sources)
    key.emplace_back(t.data_ptr(), VersionOf(t));
  if (key == built_from_)
    return;
  built_from_ = std::move(key);
  transformed_ = {};
  weight_ = conv_->weight;
  bias_ = conv_->bias;
  if (frozen_ != nullptr) {
    // conv then x·scale + shift is one conv with weight·scale and bias·scale + shift.
    auto [scale, shift] = frozen_->ScaleShift();
    weight_ = conv_->weight * scale.reshape({-1, 1, 1, 1});
    bias_ = bias_.defined() ? bias_ * scale + shift : shift;
  }
}

at::Tensor FastConv::Forward(const at::Tensor& x, bool relu) {
  if (!fast_ok_ || conv_->weight.scalar_type() != at::kFloat || !CpuInferenceFastPath(x))
    return Modules(x, relu);
  Refresh();
  // A norm that cannot be folded (GroupNorm) runs after the convolution, the ReLU after it.
  const bool norm_after = norm_ != nullptr && frozen_ == nullptr;
  const bool conv_relu = relu && !norm_after;
  at::Tensor y;
  if (winograd_ok_) {
    const int64_t tile = TileFor(x.size(0), x.size(2), x.size(3));
    at::Tensor& transformed = transformed_[tile / 2 - 1];
    if (!transformed.defined())
      transformed = kernels::WinogradConv3x3Weight(weight_, tile);
    std::optional<at::Tensor> bias;
    if (bias_.defined())
      bias = bias_;
    y = kernels::WinogradConv3x3(x, transformed, bias, conv_relu, tile);
  } else {
    const auto& o = conv_->options;
    const auto& padding = std::get<torch::ExpandingArray<2>>(o.padding());
    y = at::conv2d(x, weight_, bias_, *o.stride(), *padding, *o.dilation(), o.groups());
    if (conv_relu)
      y.relu_();
  }
  if (norm_after) {
    y = norm_->forward(y);
    if (relu)
      y.relu_();
  }
  return y;
}

}  // namespace mrcnn::model
