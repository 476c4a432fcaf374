// Detectron2's FastRCNNConvFCHead in general (conv_fc): NUM_CONV 3x3 convs, each with the
// head's norm and a ReLU, then NUM_FC fully connected layers with ReLUs (the 4conv1fc GN head
// of the zoo's GN configs). Two fcs and nothing else stay torchvision's TwoMLPHead (two_mlp).
#include <torch/torch.h>

#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

// Children conv1..convN (Detectron2's names; a conv's norm is "convI.norm") and fc6.. (the
// first fc where TwoMLPHead has it, so Detectron2's fcI maps to fc(I+5) for both heads).
class ConvFcBoxHead : public BoxHead {
 public:
  explicit ConvFcBoxHead(const ModelConfig& c) {
    int64_t channels = c.FeatureChannels();
    const int64_t side = c.box_pooler_resolution;
    for (int i = 1; i <= c.box_num_conv; ++i) {
      NormedConv conv =
          MakeNormedConv(channels, c.box_conv_dim, 3, 1, 1, c.box_head_norm, c.frozen_bn_eps);
      KaimingNormalFanOut(conv.conv);  // Detectron2's c2_msra_fill
      register_module("conv" + std::to_string(i), conv.conv);
      convs_.push_back(conv.fast);
      channels = c.box_conv_dim;
    }
    int64_t features = channels * side * side;
    for (int i = 1; i <= c.box_num_fc; ++i) {
      auto fc = register_module("fc" + std::to_string(i + 5), nn::Linear(features, c.box_fc_dim));
      nn::init::kaiming_uniform_(fc->weight, 1.0);  // Detectron2's c2_xavier_fill
      nn::init::zeros_(fc->bias);
      fcs_.push_back(fc);
      features = c.box_fc_dim;
    }
    representation_ = features;
  }

  // The convs run through FastConv (which may answer in bf16 under a bf16 precision scope);
  // the fcs and the predictor take float32.
  at::Tensor Forward(const at::Tensor& pooled) override {
    at::Tensor x = pooled;
    for (FastConv& conv : convs_)
      x = conv.Forward(x, /*relu=*/true);
    x = x.flatten(1).to(at::kFloat);
    for (nn::Linear& fc : fcs_)
      x = fc->forward(x).relu_();
    return x;
  }
  int64_t RepresentationSize() const override { return representation_; }

 private:
  std::vector<FastConv> convs_;
  std::vector<nn::Linear> fcs_;
  int64_t representation_ = 0;
};

}  // namespace

void RegisterConvFcBoxHead(Registry<BoxHead>& registry) {
  registry.Add("conv_fc", [](const ModelConfig& c) { return std::make_shared<ConvFcBoxHead>(c); });
}

}  // namespace mrcnn::model
