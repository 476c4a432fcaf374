#pragma once
// The host's half of InferenceModel::Start / PendingDetections::Finish for untiled images:
// what each image's forward outputs need on the host (boxes, scores, labels, and the masks as
// RLE change points or as pixels), copied there while the caller goes on. Internal to
// trainer/model.
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "trainer/model/inference/inference.h"
#include "trainer/model/inference/inference_state.h"

namespace mrcnn::model {

// results: one per image of the batch, the tiled ones already complete and every one with
// its height and width; whole[j]: the index in results of outputs[j], an untiled image.
// Mask work as in Predict: with masks, each image's pasted 0/1 masks are encoded to RLE change
// points where they are when `where` asks for it (kAlways, or kOnGpu on a CUDA device),
// otherwise kept as pixels: each mask's paste box only (the paste's own integer corners for
// the model's mask resolution, clamped to the image), so on a GPU Finish gathers the boxes'
// pixels there and copies those packed eight to a byte (mask_bits.h), not H x W bytes per mask. On
// a CUDA device the copies run on a pool stream that waits for the current one, into pinned memory;
// the device outputs stay referenced until Finish has waited for them. `state` gives the class
// names and ids and must outlive the result.
std::unique_ptr<PendingDetections> StartDetectionsTransfer(const InferenceModel::State& state,
                                                           std::vector<ImageDetections> results,
                                                           std::vector<size_t> whole,
                                                           const std::vector<ImageResult>& outputs,
                                                           bool masks, MaskRleWhere where);

}  // namespace mrcnn::model
