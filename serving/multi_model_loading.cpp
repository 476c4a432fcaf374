#include "serving/multi_model_loading.h"

#include <fmt/format.h>

#include <optional>

#include "serving/log_line.h"
#include "serving/models/core_share.h"
#include "serving/models/memory_limit.h"
#include "serving/predictor_loading.h"

namespace mrcnn::serving {
namespace {

ServerConfig ModelConfig(const ServerConfig& config, const std::filesystem::path& dir, int cores) {
  ServerConfig model = config;
  model.model_dir = dir;
  model.model_dir_source = "POST /models";
  if (model.workers == 0)
    model.workers = 1;
  ResolveWorkers(model, ResolvePredictorKind(model), cores);
  return model;
}

// What must outlive a model's executor, owned together with it.
struct ExecutorWithCores {
  std::optional<CoreShare> core_share;
  std::unique_ptr<InferenceExecutor> executor;
};

}  // namespace

HostedModelsOptions MultiModelOptions(const ServerConfig& config, int cores,
                                      ServerMetrics* metrics) {
  HostedModelsOptions options;
  options.memory_budget_bytes = config.mme_memory_budget_bytes;
  if (options.memory_budget_bytes == 0) {
    const MemoryLimit limit = ReadMemoryLimit();
    options.memory_budget_bytes = limit.bytes / 4 * 3;
    LogLine("multi-model memory budget {} MiB: 3/4 of {} MiB ({})",
            options.memory_budget_bytes >> 20, limit.bytes >> 20, limit.source);
  }
  options.footprint = [&config, cores](const std::filesystem::path& dir) {
    const ServerConfig model = ModelConfig(config, dir, cores);
    return ModelFootprint(dir, model.workers, config.mme_workspace_bytes);
  };
  options.make_executor = [&config, cores, metrics](
                              const std::filesystem::path& dir,
                              std::function<void(std::exception_ptr)> on_loaded) {
    const ServerConfig model = ModelConfig(config, dir, cores);
    auto owner = std::make_shared<ExecutorWithCores>();
    if (model.share_cores)
      owner->core_share.emplace(model.cores, model.workers);
    CoreShare* share = owner->core_share ? &*owner->core_share : nullptr;
    owner->executor = std::make_unique<InferenceExecutor>(
        MakePredictorLoader(model, share), model.batching, std::move(on_loaded), share, metrics);
    // Aliasing: the executor's lifetime is the owner's, which destroys the executor first.
    return std::shared_ptr<InferenceExecutor>(owner, owner->executor.get());
  };
  options.log = [](const std::string& line) { LogLine("{}", line); };
  return options;
}

}  // namespace mrcnn::serving
