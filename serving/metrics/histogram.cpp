#include "serving/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mrcnn::serving {

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i]) || (i > 0 && upper_bounds_[i] <= upper_bounds_[i - 1])) {
      throw std::invalid_argument("histogram bounds must be finite and strictly ascending");
    }
  }
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_.size() + 1);
}

void Histogram::Observe(double value) {
  // Prometheus buckets are "less than or equal": the first bound >= value.
  const auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  counts_[static_cast<size_t>(bucket - upper_bounds_.begin())].fetch_add(1,
                                                                         std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  snapshot.cumulative.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> Histogram::LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> Histogram::BatchBounds() {
  return {1, 2, 4, 8, 16, 32, 64};
}

}  // namespace mrcnn::serving
