#include "serving/models/multi_model_loading.h"

#include <fmt/format.h>

#include <memory>

#include "serving/http/log_line.h"
#include "serving/models/core_share.h"
#include "serving/models/memory_limit.h"

namespace mrcnn::serving {
namespace {

// What must outlive a model's executor, owned together with it.
struct ExecutorWithCores {
  std::optional<CoreShare> core_share;
  std::unique_ptr<InferenceExecutor> executor;
};

}  // namespace

HostedModelsOptions MultiModelOptions(MultiModelSettings settings, ServerMetrics* metrics) {
  HostedModelsOptions options;
  options.memory_budget_bytes = settings.memory_budget_bytes;
  if (options.memory_budget_bytes == 0) {
    const MemoryLimit limit = ReadMemoryLimit();
    options.memory_budget_bytes = limit.bytes / 4 * 3;
    LogLine("multi-model memory budget {} MiB: 3/4 of {} MiB ({})",
            options.memory_budget_bytes >> 20, limit.bytes >> 20, limit.source);
  }
  options.footprint = [plan = settings.plan,
                       workspace = settings.workspace_bytes](const std::filesystem::path& dir) {
    return ModelFootprint(dir, plan(dir).batching.workers, workspace);
  };
  options.make_executor = [plan = settings.plan, metrics](
                              const std::filesystem::path& dir,
                              std::function<void(std::exception_ptr)> on_loaded) {
    const HostedModelPlan model = plan(dir);
    auto owner = std::make_shared<ExecutorWithCores>();
    if (model.shared_cores.has_value())
      owner->core_share.emplace(*model.shared_cores, model.batching.workers);
    CoreShare* share = owner->core_share ? &*owner->core_share : nullptr;
    owner->executor =
        std::make_unique<InferenceExecutor>(MakePredictorLoader(model.source, share),
                                            model.batching, std::move(on_loaded), share, metrics);
    // Aliasing: the executor's lifetime is the owner's, which destroys the executor first.
    return std::shared_ptr<InferenceExecutor>(owner, owner->executor.get());
  };
  options.log = [](const std::string& line) { LogLine("{}", line); };
  return options;
}

}  // namespace mrcnn::serving
