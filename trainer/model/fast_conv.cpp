#include "trainer/model/fast_conv.h"

#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>

#include "kernels/ops.h"

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

}  // namespace

bool CpuInferenceFastPath(const at::Tensor& x) {
  return CpuWinogradEnabled() && !c10::GradMode::is_enabled() && x.is_cpu() && x.dim() == 4 &&
         x.scalar_type() == at::kFloat && !at::autocast::is_autocast_enabled(at::kCPU);
}

FastConv3x3::FastConv3x3(torch::nn::Conv2d conv) : conv_(std::move(conv)) {
  const auto& o = conv_->options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  shape_ok_ = (*o.kernel_size())[0] == 3 && (*o.kernel_size())[1] == 3 && (*o.stride())[0] == 1 &&
              (*o.stride())[1] == 1 && (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 &&
              o.groups() == 1 && padding != nullptr && (**padding)[0] == 1 && (**padding)[1] == 1 &&
              std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
}

bool FastConv3x3::Eligible(const at::Tensor& x) const {
  return shape_ok_ && conv_->weight.scalar_type() == at::kFloat && CpuInferenceFastPath(x);
}

at::Tensor FastConv3x3::Forward(const at::Tensor& x, bool relu) {
  if (!Eligible(x)) {
    at::Tensor y = conv_->forward(x);
    return relu ? y.relu_() : y;
  }
  const at::Tensor& weight = conv_->weight;
  // Inference tensors carry no version counter; they cannot change outside inference mode.
  const int64_t version = weight.is_inference() ? 0 : static_cast<int64_t>(weight._version());
  if (transformed_from_ != weight.data_ptr() || transformed_version_ != version) {
    for (at::Tensor& t : transformed_)
      t = at::Tensor();
    transformed_from_ = weight.data_ptr();
    transformed_version_ = version;
  }
  const int64_t tile = TileFor(x.size(0), x.size(2), x.size(3));
  at::Tensor& transformed = transformed_[tile / 2 - 1];
  if (!transformed.defined())
    transformed = kernels::WinogradConv3x3Weight(weight, tile);
  std::optional<at::Tensor> bias;
  if (conv_->bias.defined())
    bias = conv_->bias;
  return kernels::WinogradConv3x3(x, transformed, bias, relu, tile);
}

}  // namespace mrcnn::model
