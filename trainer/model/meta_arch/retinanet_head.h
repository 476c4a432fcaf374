#pragma once
// RetinaNet's dense head (Detectron2's RetinaNetHead), shared by every FPN level: a class
// subnet and a box subnet of MODEL.RETINANET.NUM_CONVS 3x3 convs with ReLU, then cls_score
// (A x K logits, its bias at -log((1 - p) / p) for PRIOR_PROB p) and bbox_pred (A x 4
// deltas), all 3x3. Parameter names are Detectron2's (head.cls_subnet.{0,2,..},
// head.bbox_subnet.*, head.cls_score, head.bbox_pred), so its checkpoints load as they are.
#include <torch/nn/module.h>

#include <utility>
#include <vector>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"

namespace mrcnn::model {

class RetinaNetHead : public torch::nn::Module {
 public:
  explicit RetinaNetHead(const ModelConfig& config);
  // Per level: class logits N x (A*K) x H x W and box deltas N x (A*4) x H x W.
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> Forward(
      const std::vector<at::Tensor>& features);
  int64_t AnchorsPerLocation() const { return anchors_; }
  int64_t NumClasses() const { return classes_; }
  // Detectron2's loss normaliser: an exponential moving average of the foreground anchors
  // per batch (momentum 0.9, starting at 100), kept on the device as a 0-d tensor, not saved
  // (Detectron2 keeps it as a plain attribute too).
  at::Tensor& loss_normalizer() { return loss_normalizer_; }

 private:
  int64_t anchors_, classes_;
  std::vector<FastConv> cls_subnet_, bbox_subnet_;
  FastConv cls_score_, bbox_pred_;
  at::Tensor loss_normalizer_;
};

}  // namespace mrcnn::model
