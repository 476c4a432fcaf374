#include "serving/routes/metrics_route.h"

#include <string>

#include "serving/metrics/prometheus_text.h"

namespace mrcnn::serving {

namespace http = boost::beast::http;

void AddMetricsRoute(RouteTable& table, MetricsSources sources) {
  table.Add(http::verb::get, "/metrics", [sources](const RequestHead&) {
    ServerMetrics::Live live;
    if (sources.lifecycle->Draining()) {
      live.state = ServerMetrics::ModelState::kDraining;
    } else if (sources.executor != nullptr && !sources.executor->Ready()) {
      live.state = ServerMetrics::ModelState::kLoading;
    } else {
      live.state = ServerMetrics::ModelState::kReady;
    }
    if (sources.hosted != nullptr) {
      live.models_loaded = sources.hosted->List().size();
    } else if (sources.executor != nullptr && sources.executor->Ready()) {
      live.models_loaded = 1;
    }
    live.in_flight = sources.lifecycle->InFlight();
    // Rendered here, on the I/O thread: a scrape is microseconds of work.
    return ImmediateExchange(
        RouteAnswer{200, sources.metrics->Render(live), std::string(kPrometheusContentType), {}});
  });
}

}  // namespace mrcnn::serving
