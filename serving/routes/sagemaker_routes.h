#pragma once
// The SageMaker serving routes, as a RouteTable for HttpServer:
//   GET  /ping                  200 once the model is loaded and warmed up, else 503
//                               not_ready; 503 draining after SIGTERM. Answered on the I/O
//                               thread.
//   GET  /execution-parameters  {"MaxConcurrentTransforms", "BatchStrategy" (SINGLE_RECORD or
//                               MULTI_RECORD), "MaxPayloadInMB"} for batch transform
//   POST /invocations           invocation_route.h
// Also owns the CPU pool that decodes requests and encodes answers. Another hosting mode
// (e.g. multi-model: /models, /models/{name}, /models/{name}/invoke) adds its routes to
// table() before the server starts.
#include <boost/asio/thread_pool.hpp>

#include "serving/http/route_table.h"
#include "serving/http/server_lifecycle.h"
#include "serving/models/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

class SageMakerRoutes {
 public:
  // config, executor and lifecycle must outlive this object. A null executor is a
  // multi-model endpoint (SAGEMAKER_MULTI_MODEL): /ping answers 200 with no model loaded
  // (until draining), and /invocations answers 400 no_target_model, since the platform invokes
  // /models/{name}/invoke there (multi_model_routes.h adds those routes).
  SageMakerRoutes(const ServerConfig& config, InferenceExecutor* executor,
                  ServerLifecycle& lifecycle);
  // Waits for the decoding and encoding still queued on the CPU pool.
  ~SageMakerRoutes();
  SageMakerRoutes(const SageMakerRoutes&) = delete;
  SageMakerRoutes& operator=(const SageMakerRoutes&) = delete;

  RouteTable& table() { return table_; }
  boost::asio::thread_pool& cpu_pool() { return cpu_pool_; }

 private:
  boost::asio::thread_pool cpu_pool_;
  RouteTable table_;
};

}  // namespace mrcnn::serving
