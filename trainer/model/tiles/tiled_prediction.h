#pragma once
// Tiled inference of one image (TileOptions in inference.h): tiles in batches through the
// model, an optional whole-image pass, the merge of tile_merge.h, and masks pasted into
// their boxes only (mask_region_paste.h). InferenceModel::Predict sends here every image
// that tiling applies to; the training engine's COCO evaluation calls it directly with
// TEST.TILE.SIZE.
//
// Memory: the image's pixels (the caller's), one batch of tiles as model input, and per
// candidate detection its box and its R x R mask probabilities; only the kept detections
// are pasted, each into its own paste box. Nothing image-sized is made per detection.
#include <torch/torch.h>

#include <array>
#include <functional>
#include <vector>

#include "trainer/model/inference/inference.h"
#include "trainer/model/inference/model_input.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/tiles/mask_region_paste.h"

namespace mrcnn::model {

struct TiledDetection {
  std::array<float, 4> box{};  // x1, y1, x2, y2 in image pixels
  float score = 0.0f;
  int64_t label = 0;  // 1..K
  RegionMask mask;    // empty without masks
  // Keypoint R-CNN: x, y (the model's continuous image coordinates) and score per keypoint,
  // from the tile the detection was kept from; empty for other models.
  std::vector<std::array<float, 3>> keypoints;
};

// The model's detections for inputs made by AddModelInput on the model's device, in their
// output sizes (the caller chooses precision and gradient mode).
using BatchForward = std::function<std::vector<ImageResult>(const ModelInputs&)>;

// How many detections a tiled image keeps after the merge, for `passes` model passes over it
// (its tiles, plus one with options.tiles.full_image): options.tiled_max_detections when set
// (> 0), else max_detections x passes, at most max_detections_cap (and at least
// max_detections, when the cap is below it).
int64_t TiledDetectionCap(const PredictOptions& options, int64_t passes);

// hwc: the image as H x W x 3 uint8 RGB on the CPU. `net`'s detection settings are set from
// `options` for the call and restored afterwards. Detections by decreasing score, at most
// options.max_detections per tile and TiledDetectionCap in all. Throws std::invalid_argument for
// invalid tile options.
std::vector<TiledDetection> PredictTiled(MetaArchitecture& net, const BatchForward& forward,
                                         const torch::Device& device, const at::Tensor& hwc,
                                         const PredictOptions& options);

}  // namespace mrcnn::model
