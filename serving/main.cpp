// build/bin/server: the SageMaker serving process (`entrypoint serve` execs it), which also
// answers the Open Inference Protocol (KServe V2) under /v2.
// Exit status: 0 after a SIGTERM drain, 1 when the model cannot be loaded or the port
// cannot be bound, 2 for a bad configuration.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "common/allocator_tuning.h"
#include "common/config_error.h"
#include "common/env_map.h"
#include "serving/http/http_server.h"
#include "serving/http/log_line.h"
#include "serving/http/server_lifecycle.h"
#include "serving/metrics/server_metrics.h"
#include "serving/models/core_share.h"
#include "serving/models/multi_model_loading.h"
#include "serving/models/predictor_loading.h"
#include "serving/routes/metrics_route.h"
#include "serving/routes/multi_model_routes.h"
#include "serving/routes/sagemaker_routes.h"
#include "serving/routes/v2_routes.h"

namespace {

void WritePortFile(const std::filesystem::path& file, uint16_t port) {
  const std::filesystem::path partial = file.string() + ".partial";
  {
    std::ofstream out(partial);
    out << port << "\n";
    if (!out) {
      throw std::runtime_error("cannot write the port file " + partial.string());
    }
  }
  std::filesystem::rename(partial, file);  // readers never see a half-written number
}

// The single model's load ended: ready, or the server exits with the reason. Nothing was
// admitted before readiness, so failing fast lets the platform report the reason instead of
// a ping timeout.
void OnModelLoaded(std::exception_ptr error) {
  if (!error) {
    mrcnn::serving::LogLine("ready: /ping answers 200");
    return;
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    mrcnn::serving::LogLine("model load failed: {}", e.what());
  }
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mrcnn::serving;
  if (const std::string note = mrcnn::common::KeepFreedMemoryForReuse(); !note.empty()) {
    LogLine("{}", note);
  }
  ServerConfig config;
  try {
    config = ParseServerConfig(argc, argv, mrcnn::common::CurrentEnvironment());
  } catch (const CommandLineExit& exit) {
    return exit.code;
  } catch (const mrcnn::common::ConfigError& e) {
    LogLine("configuration error: {}", e.what());
    return 2;
  }
  // Before the executors: requests they still hold at exit hold admissions.
  ServerLifecycle lifecycle(config.max_inflight_requests);
  ServerMetrics metrics;  // before the executors and the server, which report to it
  std::optional<CoreShare> core_share;
  std::unique_ptr<InferenceExecutor> executor;  // the one model of a single-model endpoint
  std::unique_ptr<HostedModels> hosted;         // a multi-model endpoint's models
  if (config.multi_model) {
    hosted = std::make_unique<HostedModels>(
        MultiModelOptions(MultiModelSettingsOf(config, UsableCores()), &metrics));
    LogLine(
        "multi-model endpoint (SAGEMAKER_MULTI_MODEL): no model loaded yet, memory budget {} MiB, "
        "{} MiB workspace per worker, payload limit {} bytes, deadline {} ms",
        hosted->memory_budget_bytes() >> 20, config.mme_workspace_bytes >> 20,
        config.max_payload_bytes, config.request_deadline.count());
    LogLine("ready: /ping answers 200");
  } else {
    const std::string kind = ResolvePredictorKind(PredictorSourceOf(config));
    ResolveWorkers(config, kind, UsableCores());
    const std::string threads =
        config.share_cores
            ? fmt::format("sharing {} cores (a lone request uses them all)", config.cores)
            : fmt::format("of {} intra-op thread(s)", config.num_threads);
    LogLine(
        "predictor {} from {} ({}), {} worker(s) {}, batches of up to {} images / {} us, queue {}, "
        "payload limit {} bytes, image limit {} pixels, deadline {} ms{}",
        kind, config.model_dir.string(), config.model_dir_source, config.workers, threads,
        config.batching.max_batch_images, config.batching.max_wait.count(),
        config.batching.queue_capacity, config.max_payload_bytes, config.image_limits.max_pixels,
        config.request_deadline.count(),
        config.batch_transform
            ? fmt::format(", batch transform (SAGEMAKER_BATCH, {})", config.batch_strategy)
            : "");
    if (config.share_cores) {
      core_share.emplace(config.cores, config.workers);
    }
    CoreShare* share = core_share ? &*core_share : nullptr;
    executor =
        std::make_unique<InferenceExecutor>(MakePredictorLoader(PredictorSourceOf(config), share),
                                            config.batching, OnModelLoaded, share, &metrics);
  }
  SageMakerRoutes routes(config, executor.get(), lifecycle);
  std::optional<MultiModelRoutes> multi_model_routes;
  if (hosted) {
    multi_model_routes.emplace(routes.table(), config, *hosted, lifecycle, routes.cpu_pool());
  }
  // The Open Inference Protocol (KServe V2) on the same port, limits and drain.
  AddV2Routes(routes.table(),
              {&config, executor.get(), hosted.get(), &lifecycle, &routes.cpu_pool()});
  AddMetricsRoute(routes.table(), {&metrics, &lifecycle, executor.get(), hosted.get()});
  HttpServer server(HttpOptionsOf(config), routes.table(), lifecycle, &metrics);
  uint16_t port = 0;
  try {
    port = server.Listen();
    if (!config.port_file.empty()) {
      WritePortFile(config.port_file, port);
    }
  } catch (const std::exception& e) {
    LogLine("cannot listen on {}:{}: {}", config.host, config.port, e.what());
    std::_Exit(1);
  }
  LogLine("listening on {}:{}", config.host, port);
  std::printf("listening on %s:%u\n", config.host.c_str(), static_cast<unsigned>(port));
  std::fflush(stdout);

  const bool clean = server.Run();
  if (executor) {
    executor->Stop();
  }
  multi_model_routes.reset();  // loads and unloads under way end first
  hosted.reset();              // then every model, while the decoding pool still runs
  LogLine("stopped{}", clean ? "" : " (drain timeout: some requests were cut off)");
  if (!clean) {
    std::fflush(stdout);
    std::_Exit(0);  // connections still hold work; skip destructors that would wait on them
  }
  return 0;
}
