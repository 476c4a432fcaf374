// C4's ROI head (Detectron2's Res5ROIHeads): res5 on 14x14 pooled res4 features, averaged for
// the box predictor; the same trunk feeds the mask predictor.
#include <torch/torch.h>

#include "trainer/model/parts.h"
#include "trainer/model/registry.h"
#include "trainer/model/resnet_blocks.h"

namespace mrcnn::model {
namespace nn = torch::nn;

Res5Head::Res5Head(const ModelConfig& config) : channels_(Detectron2StageChannels(config, 5)) {
  auto layer = register_module("layer4", nn::ModuleList());
  // Res5ROIHeads builds res5 with a stride of 2 whatever RES5_DILATION says (C4 has none).
  ModelConfig undilated = config;
  undilated.resnet_res5_dilation = 1;
  auto blocks = Detectron2Stage(undilated, 5, Detectron2StageBlocks(config.resnet_depth).back(),
                                Detectron2StageChannels(config, 4), layer);
  trunk_ = [blocks](const at::Tensor& pooled) {
    at::Tensor x = pooled;
    for (const auto& block : blocks)
      x = block->Forward(std::move(x));
    return x;
  };
}

at::Tensor Res5Head::Trunk(const at::Tensor& pooled) {
  return trunk_(pooled);
}

// Averaged in float32: in bf16 mode (CpuPrecisionScope) the trunk's convolutions give bf16 maps,
// and the box predictor is float32 (as after the two-MLP head).
at::Tensor Res5Head::Forward(const at::Tensor& pooled) {
  return Trunk(pooled).to(at::kFloat).mean({2, 3});
}

namespace {

class Res5MaskHead : public MaskHead {
 public:
  explicit Res5MaskHead(std::shared_ptr<Res5Head> res5) : res5_(std::move(res5)) {}
  at::Tensor Forward(const at::Tensor& pooled) override { return res5_->Trunk(pooled); }
  int64_t OutChannels() const override { return res5_->RepresentationSize(); }

 private:
  std::shared_ptr<Res5Head> res5_;
};

}  // namespace

std::shared_ptr<MaskHead> MaskHeadOnRes5(std::shared_ptr<Res5Head> res5) {
  return std::make_shared<Res5MaskHead>(std::move(res5));
}

void RegisterRes5BoxHead(Registry<BoxHead>& registry) {
  registry.Add("res5", [](const ModelConfig& c) { return std::make_shared<Res5Head>(c); });
}

}  // namespace mrcnn::model
