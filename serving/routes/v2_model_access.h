#pragma once
// What the Open Inference Protocol routes share: finding the model a path names (the single
// model under its --model_name, or a multi-model endpoint's hosted model), its one version,
// and the protocol's error answers, {"error": "<what was wrong>"}.
#include <memory>
#include <optional>
#include <string>

#include "serving/http/route.h"
#include "serving/models/hosted_models.h"
#include "serving/models/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

// The only version a model has: a model dir holds one model.
inline constexpr char kV2ModelVersion[] = "1";

struct V2ModelSource {
  const ServerConfig* config = nullptr;
  InferenceExecutor* executor = nullptr;  // the single model, or null on a multi-model endpoint
  HostedModels* hosted = nullptr;         // the hosted models there, or null
};

// A model found for one request; keeps a hosted model loaded while it is held.
struct V2Model {
  std::string name;
  InferenceExecutor* executor = nullptr;
  std::shared_ptr<HostedModels::Lease> lease;  // a multi-model endpoint's
};

// The model of the request's {name} (percent-decoded) and {version} (when the route has
// one). Throws HttpError 404 for a name that is not loaded or a version other than
// kV2ModelVersion.
V2Model FindV2Model(const V2ModelSource& source, const RequestHead& head);

// {"error": message} with this status, as application/json.
RouteAnswer V2ErrorAnswer(unsigned status, const std::string& message);
// The same for an HttpError: its detail is the message.
RouteAnswer V2ErrorAnswer(const HttpError& error);
// A SageMaker-style error answer ({"error": code, "detail": ...}, route.h) in the protocol's
// form, with its status and headers, so both protocols share one wording of each refusal.
RouteAnswer AsV2ErrorAnswer(RouteAnswer answer);

// A handler whose header-time HttpErrors are answered in the protocol's form (after the
// body is read, as the session does with its own refusals).
RouteHandler V2Handler(RouteHandler handler);

}  // namespace mrcnn::serving
