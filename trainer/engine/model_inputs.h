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
model::ImageBatch ToImageBatch(const data::Batch& batch, const c10::Device& device);
std::vector<model::ImageTarget> ToTargets(const data::Batch& batch, const c10::Device& device);

}  // namespace mrcnn::engine
