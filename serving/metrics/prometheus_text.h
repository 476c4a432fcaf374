#pragma once
// Prometheus's text exposition format (version 0.0.4, what every Prometheus scrapes): one
// `# HELP` and `# TYPE` line per metric family, then its samples, label values escaped
// (backslash, double quote, newline), +Inf/-Inf/NaN spelled as Prometheus reads them.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serving/metrics/histogram.h"

namespace mrcnn::serving {

// The Content-Type a scraper expects for this format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

using MetricLabels = std::vector<std::pair<std::string_view, std::string_view>>;

class PrometheusText {
 public:
  // type: counter, gauge or histogram. Call once per family, before its samples.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  void Sample(std::string_view name, const MetricLabels& labels, uint64_t value);
  // name_bucket{..., le="..."} for every bound and +Inf, then name_sum and name_count.
  void HistogramSamples(std::string_view name, const MetricLabels& labels,
                        const Histogram::Snapshot& snapshot);

  const std::string& text() const { return text_; }

 private:
  void Labels(const MetricLabels& labels, std::string_view le = {});
  std::string text_;
};

// A sample value as Prometheus parses it: shortest round-trip decimal, +Inf, -Inf, NaN.
std::string FormatMetricValue(double value);

}  // namespace mrcnn::serving
