#pragma once
// COCO box (and mask, with MODEL.MASK_ON) evaluation of the model on one channel: every
// image, in order, on this process, through pycocotools-equivalent COCOeval
// (trainer/eval), plus pictures of a few of its predictions for TensorBoard. The model is put in
// eval mode for the pass and restored after.
#include <cstdint>
#include <vector>

#include "trainer/engine/config/channel_layout.h"
#include "trainer/engine/events/event_storage.h"
#include "trainer/engine/hooks/evaluation.h"
#include "trainer/model/inference/inference.h"

namespace c10 {
struct Device;
}
namespace mrcnn::model {
class MetaArchitecture;
struct ModelConfig;
}  // namespace mrcnn::model

namespace mrcnn::engine {

class TrainConfig;

// A val/test channel and where its COCO files are.
struct DatasetSource {
  ChannelLayout layout;
  std::string channel;
};

// TEST.TILE.SIZE / TEST.TILE.OVERLAP as tile options; throws common::ConfigError naming the
// key when a value is out of range (called when the job starts, so a typo does not wait
// for the first evaluation).
model::TileOptions EvaluationTiles(const TrainConfig& config);

// TEST.PRECISION resolved for the device (fp32, bf16 or fp16; see model::ResolvePrecision);
// throws common::ConfigError naming the key for an unknown value or fp16 on CPU.
std::string EvaluationPrecision(const TrainConfig& config, bool cuda);

// One metrics event per IoU type ("bbox", then "segm" when masks are on), named
// `iteration`, and the first TENSORBOARD.EVAL_IMAGES images of the channel with their
// detections scoring >= 0.5 drawn (tag "val/<file name>"). With TEST.TILE.SIZE > 0 every
// image is decoded whole and predicted by tiles (model::PredictTiled; an image no larger
// than a tile is its own single tile), and no pictures are drawn.
EvaluationOutput EvaluateChannel(model::MetaArchitecture& net, const DatasetSource& source,
                                 const model::ModelConfig& mc, const TrainConfig& config,
                                 const c10::Device& device, int64_t iteration);

}  // namespace mrcnn::engine
