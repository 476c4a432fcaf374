#pragma once
// What a training job leaves for serving and for tests.
#include <cstdint>
#include <filesystem>
#include <string>

namespace mrcnn::data {
class CocoDataset;
}
namespace mrcnn::model {
class MetaArchitecture;
}

namespace mrcnn::engine {

class TrainConfig;

// The model dir: model.safetensors (float32 weights and buffers on CPU, without
// num_batches_tracked), config.yaml (the resolved config, MODEL.WEIGHTS cleared) and
// classes.json ([{"id", "name"}] in label order). Throws naming the file it cannot write.
void WriteModelDir(model::MetaArchitecture& net, const TrainConfig& config,
                   const data::CocoDataset& dataset, const std::filesystem::path& dir);

// <dir>/<when>_rank<rank>.safetensors with every weight and buffer (WeightsDumpHook).
void DumpWeights(model::MetaArchitecture& net, const std::filesystem::path& dir, int64_t rank,
                 const std::string& when);

}  // namespace mrcnn::engine
