#pragma once
// POST /v2/models/{name}[/versions/{version}]/infer (v2_routes.h). From the headers, on the
// I/O thread: the model (404), its readiness (503), Inference-Header-Content-Length (the
// binary tensor extension; header names match in any case). Then, on the CPU pool: the request
// (codec/v2_request_decoding.h, codec/v2_detector_request.h), every image decoded, one
// executor job, the answer (codec/v2_response_encoding.h): application/json, or
// application/octet-stream with Inference-Header-Content-Length when an output is binary.
// Admission (--max-inflight) and the deadline (SAGEMAKER_MODEL_SERVER_TIMEOUT) hold as for
// /invocations; every error is {"error": "<message>"} (400 for the request, 500 for a model
// failure, 503 for overload and shutdown).
#include <optional>

#include "serving/http/route.h"
#include "serving/routes/v2_model_access.h"
#include "serving/routes/v2_routes.h"

namespace mrcnn::serving {

RouteHandler V2InferRoute(V2Services services);

// Inference-Header-Content-Length of a request, its name matched in any case (nullopt when
// absent). Throws HttpError 400 when it is not a decimal number.
std::optional<size_t> V2HeaderLengthOf(const boost::beast::http::request_header<>& fields);

}  // namespace mrcnn::serving
