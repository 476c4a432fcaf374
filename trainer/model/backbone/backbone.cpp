// The body and neck as one module (backbone.h).
#include "trainer/model/backbone/backbone.h"

#include <torch/torch.h>

#include "trainer/model/forward_context.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {

Backbone::Backbone(const ModelConfig& config, SharedContext context)
    : channels_last_(config.channels_last), context_(std::move(context)) {
  body_ = register_module("body", BackboneRegistry().Create(config.backbone, config));
  neck_ = register_module("fpn", NeckRegistry().Create(config.neck, config));
  FreezeBackboneLayers(*body_, config.trainable_layers);
}

std::vector<at::Tensor> Backbone::Forward(const at::Tensor& batch) {
  std::vector<at::Tensor> body = body_->Forward(
      batch.is_cuda() && channels_last_ ? batch.contiguous(at::MemoryFormat::ChannelsLast) : batch);
  context_->Phase("backbone");
  std::vector<at::Tensor> pyramid = neck_->Forward(body);
  context_->Phase("fpn");
  return pyramid;
}

int64_t Backbone::NumRpnOnlyLevels() const {
  return neck_->NumRpnOnlyLevels();
}

}  // namespace mrcnn::model
