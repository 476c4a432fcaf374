#pragma once
// Keypoint R-CNN's head (Detectron2's KRCNNConvDeconvUpsampleHead, torchvision's
// KeypointRCNNHeads + KeypointRCNNPredictor): 3x3 convs with ReLU over the pooled features,
// a 4x4 stride-2 transposed convolution to one heatmap per keypoint, then x2 bilinear
// upsampling. Parameter names are torchvision's: roi_heads.keypoint_head.{0,2,...}
// (conv i at child 2i, the ReLUs between) and roi_heads.keypoint_predictor.kps_score_lowres;
// Detectron2's conv_fcn{i} / score_lowres are mapped onto them on import (weights/).
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

#include <memory>
#include <vector>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {

class KeypointPredictor : public torch::nn::Module {
 public:
  KeypointPredictor(int64_t in_channels, int64_t num_keypoints);
  // N x K x 4R x 4R heatmap logits for N x C x R x R head features (deconv x2, bilinear x2).
  at::Tensor Forward(const at::Tensor& x);

 private:
  torch::nn::ConvTranspose2d kps_score_lowres_{nullptr};
};

// MODEL.ROI_KEYPOINT_HEAD.NAME KRCNNConvDeconvUpsampleHead.
class ConvDeconvUpsampleKeypointHead : public KeypointHead {
 public:
  explicit ConvDeconvUpsampleKeypointHead(const ModelConfig& config);
  // N x K x 4R x 4R heatmap logits for N x C x R x R pooled features.
  at::Tensor Forward(const at::Tensor& pooled) override;
  // The predictor is a sibling module (roi_heads.keypoint_predictor), registered by the ROI
  // heads beside this head, as torchvision lays them out.
  std::shared_ptr<torch::nn::Module> Predictor() const override { return predictor_; }

 private:
  std::vector<FastConv> convs_;
  std::shared_ptr<KeypointPredictor> predictor_;
};

}  // namespace mrcnn::model
