#include "serving/models/detection_filter.h"

#include <algorithm>
#include <utility>

namespace mrcnn::serving {

ImageDetections FilterDetections(ImageDetections detections, const PredictOptions& options) {
  // A tiled request ran with exactly its own options, and its merged result may hold more
  // than max_detections (that is per tile): the predictor applied its cap already.
  const size_t limit = options.tile_size > 0
                           ? detections.detections.size()
                           : static_cast<size_t>(std::max(options.max_detections, 0));
  std::vector<Detection> kept;
  kept.reserve(std::min(detections.detections.size(), limit));
  for (Detection& detection : detections.detections) {
    if (kept.size() >= limit) {
      break;
    }
    if (!(detection.score > options.score_threshold)) {
      continue;
    }
    if (!options.masks) {
      detection.mask.clear();
      detection.mask.shrink_to_fit();
      detection.mask_region = {};
      detection.mask_rle = {};
    }
    kept.push_back(std::move(detection));
  }
  detections.detections = std::move(kept);
  return detections;
}

}  // namespace mrcnn::serving
