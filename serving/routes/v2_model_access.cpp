#include "serving/routes/v2_model_access.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "serving/routes/multi_model_routes.h"

namespace mrcnn::serving {
namespace {

std::string Param(const RequestHead& head, const char* name) {
  const auto it = head.params.find(name);
  return it == head.params.end() ? std::string() : PercentDecode(it->second);
}

HttpError UnknownModel(const std::string& name, const V2ModelSource& source) {
  if (source.hosted != nullptr) {
    return HttpError(404, "model_not_found",
                     fmt::format("no model \"{}\" is loaded; load it with POST /models", name));
  }
  return HttpError(404, "model_not_found",
                   fmt::format("no model \"{}\": this server serves \"{}\" (--model_name or "
                               "MRCNN_MODEL_NAME)",
                               name, source.config->model_name));
}

}  // namespace

V2Model FindV2Model(const V2ModelSource& source, const RequestHead& head) {
  V2Model model{Param(head, "name"), nullptr, nullptr};
  if (source.hosted != nullptr) {
    model.lease = std::make_shared<HostedModels::Lease>(source.hosted->Acquire(model.name));
    if (!*model.lease) {
      throw UnknownModel(model.name, source);
    }
    model.executor = &model.lease->executor();
  } else if (source.executor != nullptr && model.name == source.config->model_name) {
    model.executor = source.executor;
  } else {
    throw UnknownModel(model.name, source);
  }
  if (head.params.contains("version")) {
    const std::string version = Param(head, "version");
    if (version != kV2ModelVersion) {
      throw HttpError(404, "model_not_found",
                      fmt::format("model \"{}\" has no version \"{}\"; its only version is \"{}\"",
                                  model.name, version, kV2ModelVersion));
    }
  }
  return model;
}

RouteAnswer V2ErrorAnswer(unsigned status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", message}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return RouteAnswer{status, body, "application/json", {}};
}

RouteAnswer V2ErrorAnswer(const HttpError& error) {
  RouteAnswer answer = V2ErrorAnswer(error.status(), error.detail());
  answer.headers = error.headers();
  return answer;
}

RouteAnswer AsV2ErrorAnswer(RouteAnswer answer) {
  const auto doc = nlohmann::json::parse(answer.body, nullptr, false);
  std::string message = answer.body;
  if (doc.is_object() && doc.contains("detail") && doc["detail"].is_string()) {
    message = doc["detail"].get<std::string>();
  }
  RouteAnswer v2 = V2ErrorAnswer(answer.status, message);
  v2.headers = std::move(answer.headers);
  return v2;
}

RouteHandler V2Handler(RouteHandler handler) {
  return [handler = std::move(handler)](const RequestHead& head) {
    try {
      return handler(head);
    } catch (const HttpError& e) {
      return ImmediateExchange(V2ErrorAnswer(e));
    }
  };
}

}  // namespace mrcnn::serving
