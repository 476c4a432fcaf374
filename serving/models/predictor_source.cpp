#include "serving/models/predictor_source.h"

namespace mrcnn::serving {

std::string ResolvePredictorKind(const PredictorSource& source) {
  if (source.predictor != "auto") {
    return source.predictor;
  }
  return std::filesystem::exists(source.model_dir / kStatisticsPredictorMarker) ? "statistics"
                                                                                : "model";
}

}  // namespace mrcnn::serving
