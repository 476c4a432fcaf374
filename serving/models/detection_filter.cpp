#include "serving/models/detection_filter.h"

#include <algorithm>
#include <utility>

namespace mrcnn::serving {

ImageDetections FilterDetections(ImageDetections detections, const PredictOptions& options) {
  std::vector<Detection> kept;
  kept.reserve(std::min<size_t>(detections.detections.size(),
                                static_cast<size_t>(std::max(options.max_detections, 0))));
  for (Detection& detection : detections.detections) {
    if (static_cast<int>(kept.size()) >= options.max_detections) {
      break;
    }
    if (!(detection.score > options.score_threshold)) {
      continue;
    }
    if (!options.masks) {
      detection.mask.clear();
      detection.mask.shrink_to_fit();
      detection.mask_region = {};
    }
    kept.push_back(std::move(detection));
  }
  detections.detections = std::move(kept);
  return detections;
}

}  // namespace mrcnn::serving
