#pragma once
// POST /invocations (http/route.h). From the headers, on the I/O thread: the custom attributes
// (X-Amzn-SageMaker-Custom-Attributes, echoed on every answer once valid), the body kind
// from Content-Type, Accept against the answer's type, readiness. Then, on the CPU pool:
//   image/*, application/json   one request: split, decode every image, one InferenceJob,
//                               one answer (a bad image fails the request: 400)
//   application/jsonlines       record by record (multi_record_run.h): a bad record is an
//                               error line, its neighbours are answered
// Admission (at most --max-inflight requests) and the deadline (SAGEMAKER_MODEL_SERVER_TIMEOUT)
// hold for both. A multi-model /models/{name}/invoke route is this handler over the named
// model's executor.
#include <boost/asio/thread_pool.hpp>

#include "serving/http/route.h"
#include "serving/http/server_lifecycle.h"
#include "serving/models/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

// Everything must outlive the handler and the requests it started.
struct InvocationServices {
  const ServerConfig* config = nullptr;
  InferenceExecutor* executor = nullptr;
  ServerLifecycle* lifecycle = nullptr;
  boost::asio::thread_pool* cpu_pool = nullptr;  // decoding and encoding
};

RouteHandler InvocationRoute(InvocationServices services);

// The 503 answer of a request that ran out of time.
RouteAnswer DeadlineExceededAnswer(const ServerConfig& config);
// The 503 answer of a request not admitted under --max-inflight.
RouteAnswer NotAdmittedAnswer(const ServerLifecycle& lifecycle);
// The 503 answer for a job the executor did not accept (queue_full, not_ready,
// shutting_down); `result` is not kAccepted.
RouteAnswer RefusedJobAnswer(InferenceExecutor::SubmitResult result, const ServerConfig& config);

}  // namespace mrcnn::serving
