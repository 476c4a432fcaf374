#pragma once
// How a multi-model endpoint makes each model's executor: the single-model server's loading
// (predictor_loading.h) with the model dir SageMaker names in POST /models, one worker per
// model unless SAGEMAKER_MODEL_SERVER_WORKERS says otherwise (every worker holds a copy of
// the weights, and an endpoint hosts many models), that worker using every core for a lone
// request as the single-model server does. The budget is MRCNN_MME_MEMORY_BUDGET_MB, else
// 3/4 of the container's memory limit (models/memory_limit.h), the rest being the server itself
// and the requests' images. The server's flags come in as MultiModelSettings
// (server_config.h MultiModelSettingsOf).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "serving/models/hosted_models.h"
#include "serving/models/predictor_loading.h"

namespace mrcnn::serving {

// How one hosted model runs.
struct HostedModelPlan {
  PredictorSource source;
  BatchingPolicy batching;          // batching.workers: the model's instances
  std::optional<int> shared_cores;  // set: the busy workers share these cores (core_share.h)
};

struct MultiModelSettings {
  uint64_t memory_budget_bytes = 0;  // 0: 3/4 of the container's memory limit
  uint64_t workspace_bytes = 0;      // activations charged per worker of a model
  // The plan for the model in a dir; called from any thread, more than once per model.
  std::function<HostedModelPlan(const std::filesystem::path& dir)> plan;
};

// `metrics` (null: none) must outlive the HostedModels made with these options.
HostedModelsOptions MultiModelOptions(MultiModelSettings settings, ServerMetrics* metrics);

}  // namespace mrcnn::serving
