#pragma once
// The server's numbers for Prometheus (GET /metrics, routes/metrics_route.h): what the HTTP
// side, the executors and the process report, rendered in the text format on each scrape.
// Everything here is cheap on the request path (an atomic add, or one short lock per answered
// request) and a scrape takes microseconds, so scraping every second under load costs
// nothing measurable. Thread-safe; Torch-free; knows nothing of HTTP or models.
//
// Families (all prefixed mrcnn_, plus the standard process_* ones):
//   http_requests_total{method,route,code}       answers sent, counted when the answer is
//                                                 handed to the connection (before its bytes)
//   http_request_duration_seconds{route}         first header byte -> answer handed over
//   http_requests_in_flight                      admitted, not yet finished (--max-inflight)
//   inference_queue_wait_seconds                 queued -> its batch starts
//   inference_model_seconds                      one batch's model calls
//   inference_batch_images                       images per batch
//   inference_queue_depth                        requests waiting for a worker
//   model_state{state}                           1 for the current one of loading, ready,
//                                                 draining
//   models_loaded                                models answering (multi-model: loaded ones)
//   process_resident_memory_bytes, process_virtual_memory_bytes, process_cpu_seconds_total,
//   process_open_fds, process_start_time_seconds (process_statistics.h)
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "serving/metrics/histogram.h"

namespace mrcnn::serving {

// Route label of a request no route took (404, 405, or refused before routing: 400, 413, 431).
inline constexpr std::string_view kUnmatchedRoute = "unmatched";

class ServerMetrics {
 public:
  ServerMetrics();

  // One answer: route is the route table's pattern ("/models/{name}/invoke"), so the label
  // set stays small whatever the clients send.
  void CountAnswer(std::string_view method, std::string_view route, unsigned status,
                   double seconds);
  void ObserveQueueWait(double seconds) { queue_wait_.Observe(seconds); }
  void ObserveBatch(int images, double model_seconds);
  // +1 when a request is queued, -1 when a worker takes it or it is abandoned.
  void AddQueued(int64_t delta) { queued_.fetch_add(delta, std::memory_order_relaxed); }

  // What only the caller knows at scrape time.
  enum class ModelState { kLoading, kReady, kDraining };
  struct Live {
    ModelState state = ModelState::kLoading;
    uint64_t models_loaded = 0;
    uint64_t in_flight = 0;
  };
  // The whole exposition, process_* families included.
  std::string Render(const Live& live) const;

 private:
  struct RouteCounts {
    std::map<std::tuple<std::string, unsigned>, uint64_t> by_method_code;
    std::unique_ptr<Histogram> duration;
  };
  mutable std::mutex mutex_;
  std::map<std::string, RouteCounts, std::less<>> routes_;
  Histogram queue_wait_;
  Histogram model_time_;
  Histogram batch_images_;
  std::atomic<int64_t> queued_{0};
};

}  // namespace mrcnn::serving
