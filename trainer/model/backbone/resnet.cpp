// ResNet-18/50/101 bodies as torchvision builds them (layer names, strides, initialisation),
// each convolution with its norm in a FastConv, and the freezing of their early layers.
#include "trainer/model/backbone/resnet.h"

#include <torch/torch.h>

#include <limits>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

std::shared_ptr<NormLayer> MakeNorm(const ModelConfig& config, int64_t channels) {
  if (config.norm == "GN")
    return std::make_shared<GroupNorm2d>(channels, 32);
  return std::make_shared<FrozenBatchNorm2d>(channels, config.frozen_bn_eps);
}

// max_pool2d(x, 3, 2, 1). ATen's CPU kernel also computes the argmax of every window and
// takes ~40 ms for the stem of a 480×640 image on one core; for inference the same maxima
// come from two strided passes (rows, then columns) over a -inf padded copy in ~1/4 of the
// time. Max is exact and both propagate NaN, so the results are identical.
at::Tensor MaxPool3x3Stride2(const at::Tensor& x) {
  if (!CpuInferenceFastPath(x) && !CpuBf16Path(x))
    return torch::max_pool2d(x, 3, 2, 1);
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t out_h = (h - 1) / 2 + 1, out_w = (w - 1) / 2 + 1;
  const at::Tensor padded =
      at::constant_pad_nd(x, {1, 1, 1, 1}, -std::numeric_limits<double>::infinity());
  auto cols = [&](int64_t first) { return padded.slice(3, first, first + 2 * out_w - 1, 2); };
  const at::Tensor across = at::maximum(at::maximum(cols(0), cols(1)), cols(2));
  auto rows = [&](int64_t first) { return across.slice(2, first, first + 2 * out_h - 1, 2); };
  return at::maximum(at::maximum(rows(0), rows(1)), rows(2));
}

// ResNet residual block. Bottleneck (expansion 4) puts the stride on the 3x3 conv
// (torchvision's "ResNet v1.5"); the basic block (expansion 1) is used by ResNet-18.
class ResidualBlock : public nn::Module {
 public:
  ResidualBlock(const ModelConfig& config, bool bottleneck, int64_t in, int64_t width,
                int64_t stride)
      : bottleneck_(bottleneck) {
    const int64_t out = bottleneck ? width * 4 : width;
    if (bottleneck) {
      conv1_ = register_module("conv1", MakeConv2d(in, width, 1, 1, 0, false));
      bn1_ = register_module("bn1", MakeNorm(config, width));
      conv2_ = register_module("conv2", MakeConv2d(width, width, 3, stride, 1, false));
      bn2_ = register_module("bn2", MakeNorm(config, width));
      conv3_ = register_module("conv3", MakeConv2d(width, out, 1, 1, 0, false));
      bn3_ = register_module("bn3", MakeNorm(config, out));
    } else {
      conv1_ = register_module("conv1", MakeConv2d(in, width, 3, stride, 1, false));
      bn1_ = register_module("bn1", MakeNorm(config, width));
      conv2_ = register_module("conv2", MakeConv2d(width, width, 3, 1, 1, false));
      bn2_ = register_module("bn2", MakeNorm(config, width));
    }
    if (stride != 1 || in != out) {
      downsample_ = register_module("downsample", nn::ModuleList());
      down_conv_ = MakeConv2d(in, out, 1, stride, 0, false);
      down_norm_ = MakeNorm(config, out);
      downsample_->push_back(down_conv_);
      downsample_->push_back(down_norm_);
      down_fast_ = FastConv(down_conv_, down_norm_);
    }
    conv1_fast_ = FastConv(conv1_, bn1_);
    conv2_fast_ = FastConv(conv2_, bn2_);
    if (bottleneck)
      conv3_fast_ = FastConv(conv3_, bn3_);
    for (auto* conv : {&conv1_, &conv2_, &conv3_, &down_conv_}) {
      if (!conv->is_empty())
        KaimingNormalFanOut(*conv);
    }
  }

  at::Tensor Forward(const at::Tensor& x) {
    // ReLU and the residual add run in place on fresh temporaries, as torchvision's
    // Bottleneck does (inplace=True): none of them is saved for backward, and every
    // avoided allocation is a full activation map.
    at::Tensor out = conv1_fast_.Forward(x, /*relu=*/true);
    if (bottleneck_) {
      out = conv2_fast_.Forward(out, /*relu=*/true);
      out = conv3_fast_.Forward(out);
    } else {
      out = conv2_fast_.Forward(out);
    }
    at::Tensor identity = downsample_.is_empty() ? x : down_fast_.Forward(x);
    return out.add_(identity).relu_();
  }

 private:
  bool bottleneck_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  FastConv conv1_fast_, conv2_fast_, conv3_fast_, down_fast_;  // each with its norm
  std::shared_ptr<NormLayer> bn1_, bn2_, bn3_, down_norm_;
  nn::ModuleList downsample_{nullptr};
};

class ResNetBody : public BackboneBody {
 public:
  ResNetBody(const ModelConfig& config, bool bottleneck, std::vector<int64_t> blocks) {
    conv1_ = register_module("conv1", MakeConv2d(3, 64, 7, 2, 3, false));
    KaimingNormalFanOut(conv1_);
    bn1_ = register_module("bn1", MakeNorm(config, 64));
    conv1_fast_ = FastConv(conv1_, bn1_);
    int64_t in = 64;
    for (size_t stage = 0; stage < 4; ++stage) {
      const int64_t width = 64LL << stage;
      auto layer = register_module("layer" + std::to_string(stage + 1), nn::ModuleList());
      std::vector<std::shared_ptr<ResidualBlock>> stage_blocks;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        auto block = std::make_shared<ResidualBlock>(config, bottleneck, in, width,
                                                     (b == 0 && stage > 0) ? 2 : 1);
        layer->push_back(block);
        stage_blocks.push_back(block);
        in = bottleneck ? width * 4 : width;
      }
      out_channels_.push_back(in);
      stages_.push_back(std::move(stage_blocks));
    }
  }

  std::vector<at::Tensor> Forward(const at::Tensor& images) override {
    at::Tensor x = conv1_fast_.Forward(images, /*relu=*/true);
    x = MaxPool3x3Stride2(x);
    std::vector<at::Tensor> outs;
    for (auto& stage : stages_) {
      for (auto& block : stage)
        x = block->Forward(x);
      outs.push_back(x);
    }
    return outs;
  }
  std::vector<int64_t> OutChannels() const override { return out_channels_; }

 private:
  nn::Conv2d conv1_{nullptr};
  std::shared_ptr<NormLayer> bn1_;
  FastConv conv1_fast_;
  std::vector<std::vector<std::shared_ptr<ResidualBlock>>> stages_;
  std::vector<int64_t> out_channels_;
};

}  // namespace

std::vector<int64_t> ResNetChannels(const std::string& name) {
  if (name == "resnet18")
    return {64, 128, 256, 512};
  return {256, 512, 1024, 2048};
}

void FreezeBackboneLayers(BackboneBody& body, int trainable_layers) {
  static const char* kOrder[] = {"layer4", "layer3", "layer2", "layer1", "conv1"};
  std::vector<std::string> train;
  for (int i = 0; i < trainable_layers && i < 5; ++i)
    train.emplace_back(kOrder[i]);
  if (trainable_layers == 5)
    train.emplace_back("bn1");
  for (auto& item : body.named_parameters(true)) {
    bool trainable = false;
    for (const auto& prefix : train)
      trainable |= item.key().rfind(prefix, 0) == 0;
    if (!trainable)
      item.value().set_requires_grad(false);
  }
}

Registry<BackboneBody>& BackboneRegistry() {
  static Registry<BackboneBody> registry("backbone", "MODEL.BACKBONE.NAME");
  static bool populated = [] {
    registry.Add("resnet18", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, false, std::vector<int64_t>{2, 2, 2, 2});
    });
    registry.Add("resnet50", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, true, std::vector<int64_t>{3, 4, 6, 3});
    });
    registry.Add("resnet101", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, true, std::vector<int64_t>{3, 4, 23, 3});
    });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
