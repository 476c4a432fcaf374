#pragma once
// What makes dynamic batching exact (predictor.h): a batch runs with its loosest options,
// then each request's detections are filtered to its own.
#include "serving/models/predictor.h"

namespace mrcnn::serving {

// Applies one request's options to detections computed with looser batch options:
// keeps scores strictly above the threshold (torchvision's rule), at most max_detections,
// and drops masks when they were not asked for. Input must be sorted by descending score.
ImageDetections FilterDetections(ImageDetections detections, const PredictOptions& options);

}  // namespace mrcnn::serving
