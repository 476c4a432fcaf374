#pragma once
// The model's one interface (Detectron2's meta-architectures: GeneralizedRCNN, RetinaNet, ...).
// BuildModel(config) builds the one MODEL.META_ARCHITECTURE names, from the registry
// (registry.h, MetaArchRegistry). In train() mode forward() returns losses; in eval() mode
// each image's outputs in original image coordinates. Everything downstream (inference, the
// server, tiled prediction, the trainer's step and evaluation, weight import) talks to this
// class only; the meta-architectures' own classes (generalized_rcnn.h, retinanet.h) are for
// their rooms and tests.
//
// Parameter names are torchvision's state_dict keys (backbone.body.layer1.0.conv1.weight,
// rpn.head.conv.0.0.weight, roi_heads.box_head.fc6.weight, ...) or, for RetinaNet,
// Detectron2's (head.cls_subnet.0.weight).
#include <torch/nn/module.h>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/forward_context.h"
#include "trainer/model/registry.h"
#include "trainer/model/structures.h"

namespace mrcnn::model {

class Backbone;

class MetaArchitecture : public torch::nn::Module {
 public:
  // images: 3 x H x W float in [0, 1], RGB (torchvision's input convention). Under
  // torchvision's convention Transform resizes them (GeneralizedRCNNTransform); under
  // Detectron2's they are taken as they are, resized by the caller as Detectron2's mapper and
  // DefaultPredictor resize (inference/model_input.h does).
  // targets: required in train mode, in the coordinates of `images`.
  // output_sizes: per image the (height, width) outputs are scaled back to (Detectron2's
  // "height"/"width" inputs: the size before the caller's resize); empty: the images' sizes.
  // Runs Transform, FeatureStage, Heads and (eval) Postprocess.
  ModelOutput forward(const std::vector<at::Tensor>& images,
                      const std::optional<std::vector<ImageTarget>>& targets = std::nullopt,
                      const std::vector<std::array<int64_t, 2>>& output_sizes = {});

  // The stages of forward(), for callers that run them apart (the trainer's CUDA-graphed
  // feature stage, evaluation on a prepared batch, tests and benchmarks).
  // Normalised and padded (SIZE_DIVISIBILITY) images; under torchvision's convention also
  // resized (INPUT.MIN_SIZE_*/MAX_SIZE_*, one size drawn per image in train mode) with
  // `targets` rescaled in place when given (GeneralizedRCNNTransform). Under Detectron2's
  // neither is resized (the caller did it once).
  ImageBatch Transform(const std::vector<at::Tensor>& images, std::vector<ImageTarget>* targets);
  // The backbone's pyramid, finest first.
  std::vector<at::Tensor> Features(const at::Tensor& batch);
  // The image-wide part: the pyramid and the dense head over it. Its sizes depend only on the
  // batch's shape (the CUDA graphs' contract, FeatureStageOutput).
  virtual FeatureStageOutput FeatureStage(const at::Tensor& batch) = 0;
  // The parameters FeatureStage uses that require gradients, in a fixed order.
  virtual std::vector<at::Tensor> FeatureStageParameters() const = 0;
  // Everything after the feature stage on `batch` (whose tensor the stage ran on): the losses
  // in train mode (targets required, in the batch's coordinates), else each image's outputs
  // in resized-image pixels.
  virtual ModelOutput Heads(const ImageBatch& batch, const FeatureStageOutput& stage,
                            const std::vector<ImageTarget>* targets) = 0;
  // Each image's outputs back to original coordinates, masks pasted into the original image
  // (detector_postprocess / transform.postprocess).
  void Postprocess(const ImageBatch& batch, ModelOutput& out) const;
  void Postprocess(const ImageBatch& batch, std::vector<ImageResult>& instances) const;

  const ModelConfig& config() const { return config_; }
  DetectionSettings& detection_settings() { return context_->settings; }
  void set_sampling_generators(std::vector<at::Generator> generators) {
    context_->sampling_generators = std::move(generators);
  }
  void set_fixed_mask_rows(std::optional<bool> fixed) { context_->fixed_mask_rows = fixed; }
  void set_phase_hook(std::function<void(const char*)> hook) {
    context_->phase_hook = std::move(hook);
  }
  const std::function<void(const char*)>& phase_hook() const { return context_->phase_hook; }

 protected:
  // Validates the config and builds the backbone (module "backbone").
  explicit MetaArchitecture(const ModelConfig& config);
  // The context as the parts built by a meta-architecture read it.
  SharedContext context() const { return context_; }
  const ForwardContext& forward_context() const { return *context_; }
  Backbone& backbone() { return *backbone_; }
  const Backbone& backbone() const { return *backbone_; }
  ModelConfig config_;

 private:
  // GeneralizedRCNNTransform's size for an h x w image: floor(side * scale), the scale from
  // INPUT.MIN_SIZE_TEST/MAX_SIZE_TEST, or in train mode from a size drawn (torch's generator)
  // by INPUT.MIN_SIZE_TRAIN_SAMPLING and MAX_SIZE_TRAIN.
  std::array<int64_t, 2> TorchvisionResizedSize(int64_t h, int64_t w) const;
  std::shared_ptr<ForwardContext> context_;
  std::shared_ptr<Backbone> backbone_;
};

// The meta-architecture MODEL.META_ARCHITECTURE names (config.meta_architecture), on the CPU,
// in train mode, with fresh weights. Throws naming the key and the registered names when the
// name is unknown.
std::shared_ptr<MetaArchitecture> BuildModel(const ModelConfig& config);

}  // namespace mrcnn::model
