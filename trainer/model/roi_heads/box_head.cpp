// The box head (torchvision TwoMLPHead) and the box predictor (FastRCNNPredictor).
#include <torch/torch.h>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

// torchvision TwoMLPHead: flatten, fc6 + ReLU, fc7 + ReLU.
class TwoMlpHead : public BoxHead {
 public:
  TwoMlpHead(int64_t in_features, int64_t representation) : representation_(representation) {
    fc6_ = register_module("fc6", nn::Linear(in_features, representation));
    fc7_ = register_module("fc7", nn::Linear(representation, representation));
  }
  // In bf16 mode (CpuPrecisionScope) fc6 and fc7 run in bf16 (fc6 alone is 12.8 GMAC for 1000
  // RoIs of ResNet-50-FPN); the result is float32 again for the predictor.
  at::Tensor Forward(const at::Tensor& pooled) override {
    at::Tensor x = pooled.flatten(1);
    if (!CpuBf16Path(x))
      return fc7_->forward(fc6_->forward(x).relu_()).relu_();
    const std::vector<at::Tensor>& w =
        bf16_.Of({fc6_->weight, fc6_->bias, fc7_->weight, fc7_->bias});
    at::Tensor h = at::linear(x.to(at::kBFloat16), w[0], w[1]).relu_();
    return at::linear(h, w[2], w[3]).relu_().to(at::kFloat);
  }
  int64_t RepresentationSize() const override { return representation_; }

 private:
  int64_t representation_;
  nn::Linear fc6_{nullptr}, fc7_{nullptr};
  Bf16Copies bf16_;
};

}  // namespace

FastRcnnPredictor::FastRcnnPredictor(int64_t in_features, int64_t num_classes_with_background,
                                     bool class_agnostic) {
  cls_score_ = register_module("cls_score", nn::Linear(in_features, num_classes_with_background));
  bbox_pred_ = register_module(
      "bbox_pred",
      nn::Linear(in_features, (class_agnostic ? 1 : num_classes_with_background) * 4));
}

std::pair<at::Tensor, at::Tensor> FastRcnnPredictor::Forward(const at::Tensor& x) {
  at::Tensor flat = x.flatten(1);
  return {cls_score_->forward(flat), bbox_pred_->forward(flat)};
}

void RegisterRes5BoxHead(Registry<BoxHead>& registry);    // res5_head.cpp
void RegisterConvFcBoxHead(Registry<BoxHead>& registry);  // conv_fc_box_head.cpp

Registry<BoxHead>& BoxHeadRegistry() {
  static Registry<BoxHead> registry("box head", "MODEL.ROI_BOX_HEAD.NAME");
  static bool populated = [] {
    registry.Add("two_mlp", [](const ModelConfig& c) {
      const int64_t r = c.box_pooler_resolution;
      return std::make_shared<TwoMlpHead>(c.FeatureChannels() * r * r, c.box_fc_dim);
    });
    RegisterRes5BoxHead(registry);
    RegisterConvFcBoxHead(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
