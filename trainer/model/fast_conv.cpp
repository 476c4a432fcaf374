#include "trainer/model/fast_conv.h"

#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>

#include "kernels/ops.h"

namespace mrcnn::model {
namespace {

// F(4×4, 3×3): 4× fewer multiplications than a direct 3×3 convolution; on the 2-core
// AVX2 VM 2.0× (100 RoIs at 14×14) to 3× (256 channels at 120×160) faster than oneDNN's
// direct convolution (bench/RESULTS.md, kernels).
constexpr int64_t kTile = 4;

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
  if (!transformed_.defined() || transformed_from_ != weight.data_ptr() ||
      transformed_version_ != version) {
    transformed_ = kernels::WinogradConv3x3Weight(weight, kTile);
    transformed_from_ = weight.data_ptr();
    transformed_version_ = version;
  }
  std::optional<at::Tensor> bias;
  if (conv_->bias.defined())
    bias = conv_->bias;
  return kernels::WinogradConv3x3(x, transformed_, bias, relu, kTile);
}

}  // namespace mrcnn::model
