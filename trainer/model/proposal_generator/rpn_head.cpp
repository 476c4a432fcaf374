// The standard RPN head (torchvision RPNHead with one conv layer).
#include <torch/torch.h>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

// torchvision RPNHead with one conv layer: 3x3 conv + ReLU shared over levels, then
// 1x1 objectness (A) and 1x1 box deltas (4A).
class StandardRpnHead : public RpnHead {
 public:
  StandardRpnHead(int64_t channels, int64_t num_anchors) {
    conv_ = MakeConv2d(channels, channels, 3, 1, 1, true);
    // Nested for the key rpn.head.conv.0.0.weight; nn::Sequential(nn::Sequential(...)) would
    // copy the holder instead of nesting it, and a Sequential cannot hold a Sequential.
    nn::ModuleList conv_block;
    conv_block->push_back(nn::Sequential(conv_, nn::ReLU()));
    register_module("conv", conv_block);
    cls_logits_ = register_module("cls_logits", MakeConv2d(channels, num_anchors, 1, 1, 0, true));
    bbox_pred_ = register_module("bbox_pred", MakeConv2d(channels, num_anchors * 4, 1, 1, 0, true));
    for (auto* conv : {&conv_, &cls_logits_, &bbox_pred_}) {
      nn::init::normal_((*conv)->weight, 0.0, 0.01);
      nn::init::zeros_((*conv)->bias);
    }
    conv_fast_ = FastConv(conv_);
    cls_logits_fast_ = FastConv(cls_logits_);
    bbox_pred_fast_ = FastConv(bbox_pred_);
  }
  // In bf16 mode (CpuPrecisionScope) the logits and deltas come out bf16; Rpn decodes them as
  // float32.
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> Forward(
      const std::vector<at::Tensor>& features) override {
    std::vector<at::Tensor> logits, deltas;
    for (const auto& f : features) {
      at::Tensor t = conv_fast_.Forward(f, /*relu=*/true);
      logits.push_back(cls_logits_fast_.Forward(t));
      deltas.push_back(bbox_pred_fast_.Forward(t));
    }
    return {logits, deltas};
  }

 private:
  nn::Conv2d conv_{nullptr}, cls_logits_{nullptr}, bbox_pred_{nullptr};
  FastConv conv_fast_, cls_logits_fast_, bbox_pred_fast_;
};

int64_t AnchorsPerLocation(const ModelConfig& config) {
  return static_cast<int64_t>(config.anchor_sizes.front().size() *
                              config.anchor_aspect_ratios.front().size());
}

}  // namespace

Registry<RpnHead>& RpnHeadRegistry() {
  static Registry<RpnHead> registry("RPN head", "MODEL.RPN.HEAD_NAME");
  static bool populated = [] {
    registry.Add("standard", [](const ModelConfig& c) {
      return std::make_shared<StandardRpnHead>(c.FeatureChannels(), AnchorsPerLocation(c));
    });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
