#pragma once
// The Open Inference Protocol (KServe V2; Triton's and MLServer's REST API) beside the
// SageMaker routes, on the same port, limits, deadlines and drain:
//   GET  /v2/health/live                          200 {"live": true}
//   GET  /v2/health/ready                         200 {"ready": true} once the model is warm (as
//                                                 /ping), else 503 {"ready": false}
//   GET  /v2                                      {"name", "version", "extensions"}
//   GET  /v2/models/{name}[/versions/{version}]   model metadata (codec/v2_metadata_encoding.h);
//                                                 503 while the model loads
//   GET  /v2/models/{name}[/versions/{version}]/ready   200 {"name", "ready": true}, 503 when
//                                                 loading or draining
//   POST /v2/models/{name}[/versions/{version}]/infer   v2_infer_route.h
// {name} is the server's --model_name (MRCNN_MODEL_NAME, default "model") or, on a
// multi-model endpoint, a loaded model's name; the one version is "1". Unknown names and
// versions are 404; every error is {"error": "<message>"}.
#include <boost/asio/thread_pool.hpp>

#include "serving/http/route_table.h"
#include "serving/http/server_lifecycle.h"
#include "serving/models/hosted_models.h"
#include "serving/models/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

// The server's name and version in GET /v2.
inline constexpr char kV2ServerName[] = "detectron2-sagemaker";
inline constexpr char kV2ServerVersion[] = "1.0.0";

// Everything must outlive the table's requests. Exactly one of executor (a single-model
// server) and hosted (a multi-model endpoint) is set.
struct V2Services {
  const ServerConfig* config = nullptr;
  InferenceExecutor* executor = nullptr;
  HostedModels* hosted = nullptr;
  ServerLifecycle* lifecycle = nullptr;
  boost::asio::thread_pool* cpu_pool = nullptr;  // decoding and encoding
};

void AddV2Routes(RouteTable& table, V2Services services);

}  // namespace mrcnn::serving
