// The FPN neck (torchvision FeaturePyramidNetwork with LastLevelMaxPool).
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
// (layer_blocks), and P6 = max_pool(P5, kernel 1, stride 2).
class Fpn : public Neck {
 public:
  Fpn(const std::vector<int64_t>& in_channels, int64_t out_channels) : out_channels_(out_channels) {
    inner_blocks_ = register_module("inner_blocks", nn::ModuleList());
    layer_blocks_ = register_module("layer_blocks", nn::ModuleList());
    for (int64_t in : in_channels) {
      auto inner = MakeConv2d(in, out_channels, 1, 1, 0, true);
      auto layer = MakeConv2d(out_channels, out_channels, 3, 1, 1, true);
      for (auto* conv : {&inner, &layer}) {
        nn::init::kaiming_uniform_((*conv)->weight, 1.0);
        nn::init::zeros_((*conv)->bias);
      }
      inner_blocks_->push_back(nn::Sequential(inner));
      layer_blocks_->push_back(nn::Sequential(layer));
      inner_.push_back(FastConv(inner));
      layer_.push_back(FastConv(layer));
    }
  }

  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& x) override {
    const size_t n = x.size();
    TORCH_CHECK(n == inner_.size(), "FPN expects ", inner_.size(), " inputs, got ", n);
    std::vector<at::Tensor> results(n);
    at::Tensor last_inner = inner_[n - 1].Forward(x[n - 1]);
    results[n - 1] = layer_[n - 1].Forward(last_inner);
    for (size_t i = n - 1; i-- > 0;) {
      at::Tensor lateral = inner_[i].Forward(x[i]);
      at::Tensor top_down = at::upsample_nearest2d(last_inner, {lateral.size(-2), lateral.size(-1)},
                                                   std::nullopt, std::nullopt);
      last_inner = lateral.add_(top_down);  // lateral is a fresh temporary
      results[i] = layer_[i].Forward(last_inner);
    }
    results.push_back(torch::max_pool2d(results.back(), 1, 2, 0));
    return results;
  }
  int64_t OutChannels() const override { return out_channels_; }
  int64_t NumRpnOnlyLevels() const override { return 1; }

 private:
  int64_t out_channels_;
  nn::ModuleList inner_blocks_{nullptr}, layer_blocks_{nullptr};
  std::vector<FastConv> inner_, layer_;
};

}  // namespace

void RegisterSingleLevelNeck(Registry<Neck>& registry);  // single_level_neck.cpp

Registry<Neck>& NeckRegistry() {
  static Registry<Neck> registry("neck", "MODEL.NECK.NAME");
  static bool populated = [] {
    registry.Add("fpn", [](const ModelConfig& c) {
      return std::make_shared<Fpn>(ResNetChannels(c), c.fpn_out_channels);
    });
    RegisterSingleLevelNeck(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
