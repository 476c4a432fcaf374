#include "serving/metrics/server_metrics.h"

#include <algorithm>
#include <string>

#include "serving/metrics/process_statistics.h"
#include "serving/metrics/prometheus_text.h"

namespace mrcnn::serving {

ServerMetrics::ServerMetrics()
    : queue_wait_(Histogram::LatencyBounds()),
      model_time_(Histogram::LatencyBounds()),
      batch_images_(Histogram::BatchBounds()) {}

void ServerMetrics::CountAnswer(std::string_view method, std::string_view route, unsigned status,
                                double seconds) {
  Histogram* duration = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = routes_.find(route);
    if (it == routes_.end()) {
      it = routes_.emplace(std::string(route), RouteCounts{}).first;
      it->second.duration = std::make_unique<Histogram>(Histogram::LatencyBounds());
    }
    ++it->second.by_method_code[{std::string(method), status}];
    duration = it->second.duration.get();  // stable: entries are never erased
  }
  duration->Observe(seconds);
}

void ServerMetrics::ObserveBatch(int images, double model_seconds) {
  batch_images_.Observe(images);
  model_time_.Observe(model_seconds);
}

std::string ServerMetrics::Render(const Live& live) const {
  PrometheusText out;
  {
    std::lock_guard lock(mutex_);
    out.Family("mrcnn_http_requests_total", "counter",
               "HTTP answers sent, by method, route pattern and status code.");
    for (const auto& [route, counts] : routes_) {
      for (const auto& [key, count] : counts.by_method_code) {
        const auto& [method, code] = key;
        const std::string code_text = std::to_string(code);
        out.Sample("mrcnn_http_requests_total",
                   {{"method", method}, {"route", route}, {"code", code_text}}, count);
      }
    }
    out.Family("mrcnn_http_request_duration_seconds", "histogram",
               "From a request's first header byte until its answer is handed to the "
               "connection, by route pattern.");
    for (const auto& [route, counts] : routes_) {
      out.HistogramSamples("mrcnn_http_request_duration_seconds", {{"route", route}},
                           counts.duration->Read());
    }
  }
  out.Family("mrcnn_http_requests_in_flight", "gauge",
             "Requests admitted and not yet finished (at most --max-inflight).");
  out.Sample("mrcnn_http_requests_in_flight", {}, live.in_flight);
  out.Family("mrcnn_inference_queue_wait_seconds", "histogram",
             "From a request joining the inference queue until its batch starts.");
  out.HistogramSamples("mrcnn_inference_queue_wait_seconds", {}, queue_wait_.Read());
  out.Family("mrcnn_inference_model_seconds", "histogram",
             "The model calls of one batch (all its images).");
  out.HistogramSamples("mrcnn_inference_model_seconds", {}, model_time_.Read());
  out.Family("mrcnn_inference_batch_images", "histogram", "Images per batch run by the model.");
  out.HistogramSamples("mrcnn_inference_batch_images", {}, batch_images_.Read());
  out.Family("mrcnn_inference_queue_depth", "gauge", "Requests waiting for a model worker.");
  out.Sample("mrcnn_inference_queue_depth", {},
             static_cast<double>(std::max<int64_t>(queued_.load(std::memory_order_relaxed), 0)));
  out.Family("mrcnn_model_state", "gauge",
             "1 for the server's current state: loading (before /ping answers 200), ready, "
             "draining (after SIGTERM).");
  for (const auto& [state, name] :
       {std::pair{ModelState::kLoading, "loading"}, std::pair{ModelState::kReady, "ready"},
        std::pair{ModelState::kDraining, "draining"}}) {
    out.Sample("mrcnn_model_state", {{"state", name}}, live.state == state ? 1.0 : 0.0);
  }
  out.Family("mrcnn_models_loaded", "gauge",
             "Models answering requests (a multi-model endpoint's loaded models).");
  out.Sample("mrcnn_models_loaded", {}, live.models_loaded);

  const ProcessStatistics process = ReadProcessStatistics();
  const auto gauge = [&out](std::string_view name, std::string_view type, std::string_view help,
                            const std::optional<double>& value) {
    if (value) {
      out.Family(name, type, help);
      out.Sample(name, {}, *value);
    }
  };
  gauge("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
        process.resident_memory_bytes);
  gauge("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
        process.virtual_memory_bytes);
  gauge("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds.",
        process.cpu_seconds);
  gauge("process_open_fds", "gauge", "Number of open file descriptors.", process.open_fds);
  gauge("process_start_time_seconds", "gauge",
        "Start time of the process since the Unix epoch in seconds.", process.start_time_seconds);
  return out.text();
}

}  // namespace mrcnn::serving
