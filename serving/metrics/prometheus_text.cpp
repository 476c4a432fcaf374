#include "serving/metrics/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>

namespace mrcnn::serving {
namespace {

// Backslash and newline escaped, and with `quote` the double quote too (label values).
void AppendEscaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  return fmt::format("{}", value);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  AppendEscaped(text_, help, /*quote=*/false);  // HELP escapes backslash and newline only
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void PrometheusText::Labels(const MetricLabels& labels, std::string_view le) {
  if (labels.empty() && le.empty()) {
    return;
  }
  text_ += '{';
  bool first = true;
  const auto add = [&](std::string_view key, std::string_view value) {
    if (!first) {
      text_ += ',';
    }
    first = false;
    text_ += key;
    text_ += "=\"";
    AppendEscaped(text_, value, /*quote=*/true);
    text_ += '"';
  };
  for (const auto& [key, value] : labels) {
    add(key, value);
  }
  if (!le.empty()) {
    add("le", le);
  }
  text_ += '}';
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, double value) {
  text_ += name;
  Labels(labels);
  text_ += ' ';
  text_ += FormatMetricValue(value);
  text_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, uint64_t value) {
  text_ += name;
  Labels(labels);
  text_ += ' ';
  text_ += std::to_string(value);
  text_ += '\n';
}

void PrometheusText::HistogramSamples(std::string_view name, const MetricLabels& labels,
                                      const Histogram::Snapshot& snapshot) {
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i <= snapshot.upper_bounds.size(); ++i) {
    const std::string le = i < snapshot.upper_bounds.size()
                               ? FormatMetricValue(snapshot.upper_bounds[i])
                               : std::string("+Inf");
    text_ += bucket;
    Labels(labels, le);
    text_ += ' ';
    text_ += std::to_string(snapshot.cumulative[i]);
    text_ += '\n';
  }
  Sample(std::string(name) + "_sum", labels, snapshot.sum);
  Sample(std::string(name) + "_count", labels, snapshot.count);
}

}  // namespace mrcnn::serving
