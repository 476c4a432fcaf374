#pragma once
// A Prometheus histogram with fixed bucket bounds: Observe is lock-free (one atomic add per
// bucket hit, one for the sum), so the request path pays nanoseconds. Thread-safe.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace mrcnn::serving {

class Histogram {
 public:
  // `upper_bounds` ascending and finite; +Inf is implied. Throws std::invalid_argument
  // otherwise.
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  // A consistent-enough copy for one scrape: count is the sum of the bucket counts, so the
  // +Inf bucket always equals _count even while other threads observe.
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;

  // 1 ms .. 60 s, for latencies in seconds.
  static std::vector<double> LatencyBounds();
  // 1, 2, 4, ... 64, for images per batch.
  static std::vector<double> BatchBounds();

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative; last: +Inf
  std::atomic<double> sum_{0};
};

}  // namespace mrcnn::serving
