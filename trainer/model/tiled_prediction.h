#pragma once
// Tiled inference of one image (TileOptions in inference.h): tiles in batches through the
// model, an optional whole-image pass, the merge of tile_merge.h, and masks pasted into
// their boxes only (mask_region_paste.h). Internal to trainer/model: callers use
// InferenceModel::Predict, which sends here every image that tiling applies to.
//
// Memory: the image's pixels (the caller's), one batch of tiles as model input, and per
// candidate detection its box and its R x R mask probabilities; only the kept detections
// are pasted, each into its own paste box. Nothing image-sized is made per detection.
#include "trainer/model/inference.h"

namespace mrcnn::model {

// The caller has checked the options and the image, and holds c10::InferenceMode.
ImageDetections PredictTiled(InferenceModel::State& state, const InferenceModel::ImageView& image,
                             const PredictOptions& options);

}  // namespace mrcnn::model
