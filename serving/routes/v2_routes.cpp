#include "serving/routes/v2_routes.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "serving/codec/v2_metadata_encoding.h"
#include "serving/routes/v2_infer_route.h"
#include "serving/routes/v2_model_access.h"

namespace mrcnn::serving {
namespace {

namespace http = boost::beast::http;

RouteAnswer Json(unsigned status, const nlohmann::json& body) {
  return RouteAnswer{status,
                     body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                     "application/json",
                     {}};
}

V2ModelSource SourceOf(const V2Services& services) {
  return {services.config, services.executor, services.hosted};
}

// Whether the server takes inference requests: not draining, and the single model warm (a
// multi-model endpoint is ready with no model, as its /ping).
bool ServerReady(const V2Services& services) {
  return !services.lifecycle->Draining() &&
         (services.executor == nullptr || services.executor->Ready());
}

RouteHandler ModelMetadata(const V2Services& services) {
  return V2Handler([services](const RequestHead& head) {
    const V2Model model = FindV2Model(SourceOf(services), head);
    const auto outputs = model.executor->Outputs();
    if (!outputs) {
      throw HttpError(503, "not_ready",
                      fmt::format("model \"{}\" is still loading; its outputs are known once it "
                                  "is loaded",
                                  model.name));
    }
    return ImmediateExchange(
        RouteAnswer{200,
                    EncodeV2ModelMetadata(model.name, {kV2ModelVersion}, *outputs),
                    "application/json",
                    {}});
  });
}

RouteHandler ModelReady(const V2Services& services) {
  return V2Handler([services](const RequestHead& head) {
    const V2Model model = FindV2Model(SourceOf(services), head);
    const bool ready = !services.lifecycle->Draining() && model.executor->Ready();
    return ImmediateExchange(Json(ready ? 200 : 503, {{"name", model.name}, {"ready", ready}}));
  });
}

void AddModelRoutes(RouteTable& table, const V2Services& services, const std::string& prefix) {
  table.Add(http::verb::get, prefix, ModelMetadata(services));
  table.Add(http::verb::get, prefix + "/ready", ModelReady(services));
  table.Add(http::verb::post, prefix + "/infer", V2InferRoute(services));
}

}  // namespace

void AddV2Routes(RouteTable& table, V2Services services) {
  table.Add(http::verb::get, "/v2/health/live", [](const RequestHead&) {
    return ImmediateExchange(Json(200, {{"live", true}}));
  });
  table.Add(http::verb::get, "/v2/health/ready", [services](const RequestHead&) {
    const bool ready = ServerReady(services);
    return ImmediateExchange(Json(ready ? 200 : 503, {{"ready", ready}}));
  });
  table.Add(http::verb::get, "/v2", [](const RequestHead&) {
    return ImmediateExchange(RouteAnswer{
        200, EncodeV2ServerMetadata(kV2ServerName, kV2ServerVersion), "application/json", {}});
  });
  AddModelRoutes(table, services, "/v2/models/{name}");
  AddModelRoutes(table, services, "/v2/models/{name}/versions/{version}");
}

}  // namespace mrcnn::serving
