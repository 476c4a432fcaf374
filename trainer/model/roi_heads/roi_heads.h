#pragma once
// What a set of ROI heads is (Detectron2's ROI_HEADS_REGISTRY entries): per-region heads over
// the pooled features of each image's proposals. Built by name (MODEL.ROI_HEADS.NAME,
// registry.h RoiHeadsRegistry); its module is the meta-architecture's child "roi_heads", and
// it owns its box, mask and keypoint heads (chosen by ROI_BOX_HEAD.NAME, ROI_MASK_HEAD.NAME,
// ROI_KEYPOINT_HEAD.NAME).
#include <torch/nn/module.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/model/structures.h"

namespace mrcnn::model {

class RoiHeads : public torch::nn::Module {
 public:
  // features: the levels the poolers read, finest first (the pyramid without the levels only
  // the dense heads read). proposals: per image, in resized-image pixels (image_sizes).
  // Train mode: returns the losses (targets required; proposal_valid, the RPN's `valid`,
  // marks padding proposals, which are never sampled). Eval mode: fills `detections` per
  // image (resized-image pixels) and returns no losses.
  virtual std::map<std::string, at::Tensor> Forward(
      const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& proposals,
      const std::vector<std::array<int64_t, 2>>& image_sizes,
      const std::vector<ImageTarget>* targets, std::vector<ImageResult>* detections,
      const std::vector<at::Tensor>* proposal_valid = nullptr) = 0;
};

}  // namespace mrcnn::model
