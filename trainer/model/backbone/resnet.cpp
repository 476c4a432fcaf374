// ResNet-18/50/101 bodies as torchvision builds them (layer names, strides, initialisation),
// Detectron2's ResNet/ResNeXt bodies (MODEL.RESNETS) under the same names, each convolution
// with its norm in a FastConv, and the freezing of their early layers.
#include "trainer/model/backbone/resnet.h"

#include <torch/torch.h>

#include <limits>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"
#include "trainer/model/resnet_blocks.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

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
        ResidualBlockShape shape;
        shape.bottleneck = bottleneck;
        shape.in = in;
        shape.width = width;
        shape.out = bottleneck ? width * 4 : width;
        shape.stride = (b == 0 && stage > 0) ? 2 : 1;
        auto block = std::make_shared<ResidualBlock>(config, shape);
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
        x = block->Forward(std::move(x));
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

// Detectron2's ResNet (build_resnet_backbone): the stem (7x7/2 conv of STEM_OUT_CHANNELS,
// norm, ReLU, 3x3/2 max-pool) and the stages res2 up to the last of OUT_FEATURES, returning
// the stages OUT_FEATURES names, finest first. C4 stops after res4 (res5 is the ROI head's).
class Detectron2ResNetBody : public BackboneBody {
 public:
  explicit Detectron2ResNetBody(const ModelConfig& config) {
    const int64_t stem = config.resnet_stem_out_channels;
    conv1_ = register_module("conv1", MakeConv2d(3, stem, 7, 2, 3, false));
    KaimingNormalFanOut(conv1_);
    bn1_ = register_module(
        "bn1", MakeNormByName(Detectron2BodyNorm(config, 1), stem, config.frozen_bn_eps));
    conv1_fast_ = FastConv(conv1_, bn1_);
    const std::vector<int64_t> blocks = Detectron2StageBlocks(config.resnet_depth);
    int last = 2;
    for (const std::string& name : config.resnet_out_features)
      last = std::max(last, name.back() - '0');
    int64_t in = stem;
    for (int index = 2; index <= last; ++index) {
      auto layer = register_module("layer" + std::to_string(index - 1), nn::ModuleList());
      stages_.push_back(Detectron2Stage(config, index, blocks[static_cast<size_t>(index - 2)], in,
                                        layer, Detectron2BodyNorm(config, index)));
      in = Detectron2StageChannels(config, index);
      bool returned = false;
      for (const std::string& name : config.resnet_out_features)
        returned |= name == "res" + std::to_string(index);
      returned_.push_back(returned);
      if (returned)
        out_channels_.push_back(in);
    }
  }

  std::vector<at::Tensor> Forward(const at::Tensor& images) override {
    at::Tensor x = MaxPool3x3Stride2(conv1_fast_.Forward(images, /*relu=*/true));
    std::vector<at::Tensor> outs;
    for (size_t s = 0; s < stages_.size(); ++s) {
      for (auto& block : stages_[s])
        x = block->Forward(std::move(x));
      if (returned_[s])
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
  std::vector<bool> returned_;
  std::vector<int64_t> out_channels_;
};

}  // namespace

std::vector<int64_t> ResNetChannels(const ModelConfig& config) {
  if (config.backbone == "detectron2_resnet") {
    std::vector<int64_t> channels;
    for (const std::string& name : config.resnet_out_features)
      channels.push_back(Detectron2StageChannels(config, name.back() - '0'));
    return channels;
  }
  if (config.backbone == "resnet18")
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
    registry.Add("detectron2_resnet",
                 [](const ModelConfig& c) { return std::make_shared<Detectron2ResNetBody>(c); });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
