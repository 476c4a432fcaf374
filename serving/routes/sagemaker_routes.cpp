#include "serving/routes/sagemaker_routes.h"

#include <nlohmann/json.hpp>

#include "serving/routes/invocation_route.h"

namespace mrcnn::serving {
namespace {

namespace http = boost::beast::http;

}  // namespace

SageMakerRoutes::SageMakerRoutes(const ServerConfig& config, InferenceExecutor* executor,
                                 ServerLifecycle& lifecycle)
    : cpu_pool_(static_cast<size_t>(config.cpu_threads)) {
  table_.Add(http::verb::get, "/ping", [executor, &lifecycle](const RequestHead&) {
    if (lifecycle.Draining()) {
      return ImmediateExchange(ErrorAnswer(503, "draining", "the server is shutting down"));
    }
    if (executor != nullptr && !executor->Ready()) {
      return ImmediateExchange(
          ErrorAnswer(503, "not_ready", "the model is still loading or warming up"));
    }
    return ImmediateExchange(RouteAnswer{200, "", "", {}});
  });
  table_.Add(http::verb::get, "/execution-parameters", [&config](const RequestHead&) {
    const nlohmann::json parameters = {
        {"MaxConcurrentTransforms", config.max_concurrent_transforms},
        {"BatchStrategy", config.batch_strategy},
        {"MaxPayloadInMB", (config.max_payload_bytes + (1u << 20) - 1) >> 20},
    };
    return ImmediateExchange(RouteAnswer{200, parameters.dump(), "application/json", {}});
  });
  if (executor == nullptr) {
    table_.Add(http::verb::post, "/invocations", [](const RequestHead&) -> Exchange {
      throw HttpError(400, "no_target_model",
                      "this is a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true): load a model "
                      "with POST /models and invoke it with POST /models/{name}/invoke (SageMaker "
                      "does this for InvokeEndpoint with TargetModel)");
    });
    return;
  }
  table_.Add(http::verb::post, "/invocations",
             InvocationRoute({&config, executor, &lifecycle, &cpu_pool_}));
}

SageMakerRoutes::~SageMakerRoutes() {
  cpu_pool_.join();
}

}  // namespace mrcnn::serving
