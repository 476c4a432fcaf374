// The FPN neck (torchvision FeaturePyramidNetwork with LastLevelMaxPool, or RetinaNet's
// LastLevelP6P7).
#include <torch/torch.h>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/backbone/resnet.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

// FPN (torchvision FeaturePyramidNetwork + LastLevelMaxPool): lateral 1x1 convs
// (inner_blocks), nearest top-down upsampling to the lateral's size, 3x3 output convs
// (layer_blocks), and P6 = max_pool(P5, kernel 1, stride 2). With the "p6p7" top block
// (RetinaNet's LastLevelP6P7, extra_blocks.p6/p7): P6 = 3x3/2 conv of the body's last map
// (res5), P7 = 3x3/2 conv of ReLU(P6). The blocks' children are named by their input's
// stage, res2 = 0 (an FPN over res3-res5 has blocks 1..3), so weights map by stage.
class Fpn : public Neck {
 public:
  // norm: MODEL.FPN.NORM, after each lateral and output conv (which then have no bias).
  Fpn(const std::vector<int64_t>& in_channels, int64_t out_channels, int64_t first_index,
      bool p6p7, const std::string& norm, double frozen_bn_eps)
      : out_channels_(out_channels), p6p7_(p6p7) {
    auto inner_blocks = register_module("inner_blocks", std::make_shared<nn::Module>("ModuleList"));
    auto layer_blocks = register_module("layer_blocks", std::make_shared<nn::Module>("ModuleList"));
    for (size_t i = 0; i < in_channels.size(); ++i) {
      NormedConv inner = MakeNormedConv(in_channels[i], out_channels, 1, 1, 0, norm, frozen_bn_eps);
      NormedConv layer = MakeNormedConv(out_channels, out_channels, 3, 1, 1, norm, frozen_bn_eps);
      for (auto* conv : {&inner.conv, &layer.conv}) {
        nn::init::kaiming_uniform_((*conv)->weight, 1.0);
        if ((*conv)->bias.defined())
          nn::init::zeros_((*conv)->bias);
      }
      const std::string name = std::to_string(first_index + static_cast<int64_t>(i));
      inner_blocks->register_module(name, nn::Sequential(inner.conv));
      layer_blocks->register_module(name, nn::Sequential(layer.conv));
      inner_.push_back(inner.fast);
      layer_.push_back(layer.fast);
    }
    if (p6p7_) {
      auto extra = register_module("extra_blocks", std::make_shared<nn::Module>("LastLevelP6P7"));
      nn::Conv2d p6 = MakeConv2d(in_channels.back(), out_channels, 3, 2, 1, true);
      nn::Conv2d p7 = MakeConv2d(out_channels, out_channels, 3, 2, 1, true);
      extra->register_module("p6", p6);
      extra->register_module("p7", p7);
      for (auto* conv : {&p6, &p7}) {
        nn::init::kaiming_uniform_((*conv)->weight, 1.0);
        nn::init::zeros_((*conv)->bias);
      }
      p6_ = FastConv(p6);
      p7_ = FastConv(p7);
    }
  }

  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& x) override {
    const size_t n = x.size();
    TORCH_CHECK(n == inner_.size(), "FPN expects ", inner_.size(), " inputs, got ", n);
    std::vector<at::Tensor> results(n);
    at::Tensor last_inner = inner_[n - 1].Forward(x[n - 1]);
    results[n - 1] = layer_[n - 1].Forward(last_inner);
    for (size_t i = n - 1; i-- > 0;) {
      // The 1×1 lateral keeps x[i]'s size; the top-down map is a fresh temporary, which the
      // lateral accumulates into in bf16 mode (FastConv::ForwardAdd).
      last_inner = inner_[i].ForwardAdd(
          x[i], at::upsample_nearest2d(last_inner, {x[i].size(-2), x[i].size(-1)}, std::nullopt,
                                       std::nullopt));
      results[i] = layer_[i].Forward(last_inner);
    }
    if (p6p7_) {
      at::Tensor p6 = p6_.Forward(x[n - 1]);
      at::Tensor p7 = p7_.Forward(torch::relu(p6));
      results.push_back(std::move(p6));
      results.push_back(std::move(p7));
    } else {
      results.push_back(torch::max_pool2d(results.back(), 1, 2, 0));
    }
    return results;
  }
  int64_t OutChannels() const override { return out_channels_; }
  int64_t NumRpnOnlyLevels() const override { return p6p7_ ? 2 : 1; }

 private:
  int64_t out_channels_;
  bool p6p7_;
  std::vector<FastConv> inner_, layer_;
  FastConv p6_, p7_;
};

}  // namespace

void RegisterSingleLevelNeck(Registry<Neck>& registry);  // single_level_neck.cpp

Registry<Neck>& NeckRegistry() {
  static Registry<Neck> registry("neck", "MODEL.NECK.NAME");
  static bool populated = [] {
    registry.Add("fpn", [](const ModelConfig& c) {
      // Blocks named by stage (res2 = 0): Detectron2's FPN over res3-res5 starts at 1.
      const int64_t first = c.detectron2() ? c.resnet_out_features.front().back() - '2' : 0;
      return std::make_shared<Fpn>(ResNetChannels(c), c.fpn_out_channels, first,
                                   c.fpn_top_block == "p6p7", c.fpn_norm, c.frozen_bn_eps);
    });
    RegisterSingleLevelNeck(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
