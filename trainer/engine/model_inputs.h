#pragma once
// The model's inputs from the loader's batches (already resized, normalised and padded),
// moved to the training device, and the loader's normalisation from the model config.
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/transforms.h"
#include "trainer/model/config.h"
#include "trainer/model/structures.h"

namespace mrcnn::engine {

data::Normalization NormalizationOf(const model::ModelConfig& mc);
// The loader's resize filter: Pillow's bilinear under Detectron2's convention (what its
// ResizeShortestEdge does to uint8 images), OpenCV's under torchvision's.
data::ResizeFilter ResizeFilterOf(const model::ModelConfig& mc);
model::ImageBatch ToImageBatch(const data::Batch& batch, const c10::Device& device);
std::vector<model::ImageTarget> ToTargets(const data::Batch& batch, const c10::Device& device);

}  // namespace mrcnn::engine
