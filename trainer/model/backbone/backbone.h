#pragma once
// The backbone of every meta-architecture (Detectron2's build_backbone): the registered body
// (MODEL.BACKBONE.NAME) and neck (MODEL.NECK.NAME) as one module, children "body" and "fpn"
// (torchvision's backbone.body.*, backbone.fpn.* parameter names), the body's layers frozen
// as the config says.
#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {

class BackboneBody;
class Neck;

class Backbone : public torch::nn::Module {
 public:
  Backbone(const ModelConfig& config, SharedContext context);
  // Every pyramid level of a padded image batch (N x 3 x H x W), finest first. On CUDA with
  // MODEL.CHANNELS_LAST the maps are channels-last from here on (convolutions, FPN, the dense
  // heads, ROIAlign and the mask head keep the layout): cuDNN's bf16/fp16 kernels work in NHWC
  // and would otherwise transform every planar input and output.
  std::vector<at::Tensor> Forward(const at::Tensor& batch);
  // How many of the last levels only the dense heads read (FPN's P6), not the ROI poolers.
  int64_t NumRpnOnlyLevels() const;

 private:
  bool channels_last_;
  std::shared_ptr<BackboneBody> body_;
  std::shared_ptr<Neck> neck_;
  SharedContext context_;  // its phase hook: "backbone" after the body, "fpn" after the neck
};

}  // namespace mrcnn::model
