#pragma once
// Which predictor the server runs, and how it is made ready: load, then one warm-up
// inference (so the first caller does not pay for lazy initialisation, and /ping only turns
// 200 once inference has actually worked). Compiled into the server alone: with the model
// when the build has it (MRCNN_SERVING_WITH_MODEL).
#include "serving/models/inference_executor.h"
#include "serving/models/predictor_source.h"

namespace mrcnn::serving {

// Runs on each executor worker's thread. Throws when the model cannot be loaded or the warm-up
// inference fails, or when "model" is asked of a server built without the model library.
// core_share (the server's share_cores) is followed by the model's forwards; it must outlive
// them.
InferenceExecutor::Loader MakePredictorLoader(const PredictorSource& source,
                                              const CoreShare* core_share);

}  // namespace mrcnn::serving
