// RetinaNet's head (retinanet_head.h).
#include "trainer/model/meta_arch/retinanet_head.h"

#include <torch/torch.h>

#include <cmath>

#include "trainer/model/conv_layers.h"

namespace mrcnn::model {
namespace nn = torch::nn;

RetinaNetHead::RetinaNetHead(const ModelConfig& config)
    : anchors_(static_cast<int64_t>(config.anchor_sizes.front().size() *
                                    config.anchor_aspect_ratios.front().size())),
      classes_(config.num_classes) {
  const int64_t channels = config.fpn_out_channels;
  auto cls_subnet = register_module("cls_subnet", std::make_shared<nn::Module>("Sequential"));
  auto bbox_subnet = register_module("bbox_subnet", std::make_shared<nn::Module>("Sequential"));
  auto normal = [](nn::Conv2d& conv) {
    nn::init::normal_(conv->weight, 0.0, 0.01);
    nn::init::zeros_(conv->bias);
  };
  for (int i = 0; i < config.retinanet_num_convs; ++i) {
    // Children 0, 2, 4, ...: the ReLUs between them hold no parameters.
    const std::string name = std::to_string(2 * i);
    auto cls = MakeConv2d(channels, channels, 3, 1, 1, true);
    auto box = MakeConv2d(channels, channels, 3, 1, 1, true);
    normal(cls);
    normal(box);
    cls_subnet->register_module(name, cls);
    bbox_subnet->register_module(name, box);
    cls_subnet_.push_back(FastConv(cls));
    bbox_subnet_.push_back(FastConv(box));
  }
  nn::Conv2d cls_score = MakeConv2d(channels, anchors_ * classes_, 3, 1, 1, true);
  nn::Conv2d bbox_pred = MakeConv2d(channels, anchors_ * 4, 3, 1, 1, true);
  register_module("cls_score", cls_score);
  register_module("bbox_pred", bbox_pred);
  normal(cls_score);
  normal(bbox_pred);
  // Focal loss's prior: every anchor starts at probability PRIOR_PROB of each class.
  nn::init::constant_(cls_score->bias,
                      -std::log((1 - config.retinanet_prior_prob) / config.retinanet_prior_prob));
  cls_score_ = FastConv(cls_score);
  bbox_pred_ = FastConv(bbox_pred);
}

std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> RetinaNetHead::Forward(
    const std::vector<at::Tensor>& features) {
  std::vector<at::Tensor> logits, deltas;
  for (const at::Tensor& f : features) {
    at::Tensor c = f, b = f;
    for (auto& conv : cls_subnet_)
      c = conv.Forward(c, /*relu=*/true);
    for (auto& conv : bbox_subnet_)
      b = conv.Forward(b, /*relu=*/true);
    logits.push_back(cls_score_.Forward(c));
    deltas.push_back(bbox_pred_.Forward(b));
  }
  return {std::move(logits), std::move(deltas)};
}

}  // namespace mrcnn::model
