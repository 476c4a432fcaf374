#pragma once
// Which predictor the server runs, and how it is made ready: load, then one warm-up
// inference (so the first caller does not pay for lazy initialisation, and /ping only turns
// 200 once inference has actually worked).
#include "serving/models/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

// "statistics" when config.predictor says so, or when it is "auto" and the model dir holds
// statistics_predictor.json; "model" otherwise.
std::string ResolvePredictorKind(const ServerConfig& config);

// Runs on each executor worker's thread. Throws when the model cannot be loaded or the warm-up
// inference fails, or when "model" is asked of a server built without the model library.
// core_share (config.share_cores) is followed by the model's forwards; it must outlive them.
InferenceExecutor::Loader MakePredictorLoader(const ServerConfig& config,
                                              const CoreShare* core_share);

}  // namespace mrcnn::serving
