// Keypoint R-CNN's head and predictor (keypoint_head.h).
#include "trainer/model/roi_heads/keypoint_head.h"

#include <torch/torch.h>

#include "trainer/model/conv_layers.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

KeypointPredictor::KeypointPredictor(int64_t in_channels, int64_t num_keypoints) {
  // kernel 4, stride 2, padding 1: exactly twice the input's side.
  kps_score_lowres_ = register_module(
      "kps_score_lowres",
      nn::ConvTranspose2d(
          nn::ConvTranspose2dOptions(in_channels, num_keypoints, 4).stride(2).padding(1)));
  nn::init::kaiming_normal_(kps_score_lowres_->weight, 0.0, torch::kFanOut, torch::kReLU);
  nn::init::zeros_(kps_score_lowres_->bias);
}

at::Tensor KeypointPredictor::Forward(const at::Tensor& x) {
  const at::Tensor low = kps_score_lowres_->forward(x);
  return at::upsample_bilinear2d(low, {2 * low.size(-2), 2 * low.size(-1)},
                                 /*align_corners=*/false);
}

ConvDeconvUpsampleKeypointHead::ConvDeconvUpsampleKeypointHead(const ModelConfig& config) {
  int64_t in = config.FeatureChannels();
  for (size_t i = 0; i < config.keypoint_conv_dims.size(); ++i) {
    const int64_t out = config.keypoint_conv_dims[i];
    auto conv = MakeConv2d(in, out, 3, 1, 1, true);
    KaimingNormalFanOut(conv);
    register_module(std::to_string(2 * i), conv);
    convs_.push_back(FastConv(conv));
    in = out;
  }
  predictor_ = std::make_shared<KeypointPredictor>(in, config.num_keypoints);
}

at::Tensor ConvDeconvUpsampleKeypointHead::Forward(const at::Tensor& pooled) {
  at::Tensor x = pooled;
  for (auto& conv : convs_)
    x = conv.Forward(x, /*relu=*/true);
  // In bf16 mode the convolutions may hand over bf16 maps; the heatmaps (and their argmax to
  // sub-pixel keypoints) come from the float32 predictor.
  if (x.scalar_type() == at::kBFloat16)
    x = x.to(at::kFloat);
  return predictor_->Forward(x);
}

}  // namespace mrcnn::model

namespace mrcnn::model {

Registry<KeypointHead>& KeypointHeadRegistry() {
  static Registry<KeypointHead> registry("keypoint head", "MODEL.ROI_KEYPOINT_HEAD.NAME");
  static bool populated = [] {
    registry.Add("KRCNNConvDeconvUpsampleHead", [](const ModelConfig& c) {
      return std::make_shared<ConvDeconvUpsampleKeypointHead>(c);
    });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
