#pragma once
// GET /metrics: the server's numbers in Prometheus's text format (metrics/server_metrics.h
// lists them), for a Kubeflow/KServe or plain-container deployment's Prometheus. Answered on
// the I/O thread like /ping, so a scrape never waits behind decoding or the model, and it
// keeps answering while draining (the last scrapes see the drain).
#include "serving/http/route_table.h"
#include "serving/http/server_lifecycle.h"
#include "serving/metrics/server_metrics.h"
#include "serving/models/hosted_models.h"
#include "serving/models/inference_executor.h"

namespace mrcnn::serving {

struct MetricsSources {
  ServerMetrics* metrics = nullptr;
  const ServerLifecycle* lifecycle = nullptr;
  const InferenceExecutor* executor = nullptr;  // a single-model endpoint's model
  const HostedModels* hosted = nullptr;         // a multi-model endpoint's models
};

// Every pointer set must outlive the table's server.
void AddMetricsRoute(RouteTable& table, MetricsSources sources);

}  // namespace mrcnn::serving
