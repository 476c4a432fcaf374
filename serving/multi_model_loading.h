#pragma once
// How a multi-model endpoint makes each model's executor: the single-model server's loading
// (predictor_loading.h) with the model dir SageMaker names in POST /models, one worker per
// model unless SAGEMAKER_MODEL_SERVER_WORKERS says otherwise (every worker holds a copy of
// the weights, and an endpoint hosts many models), that worker using every core for a lone
// request as the single-model server does. The budget is MRCNN_MME_MEMORY_BUDGET_MB, else
// 3/4 of the container's memory limit (models/memory_limit.h), the rest being the server itself and
// the requests' images.
#include "serving/models/hosted_models.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

// `config` and `metrics` (null: none) must outlive the HostedModels made with these options.
HostedModelsOptions MultiModelOptions(const ServerConfig& config, int cores,
                                      ServerMetrics* metrics);

}  // namespace mrcnn::serving
