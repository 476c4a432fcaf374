// The Prometheus exposition the server renders: histogram bucket semantics, the text format's
// escaping and number spelling, and that ServerMetrics renders what it was told, every line in
// the format's grammar. Prometheus itself reads it in test_server_prometheus.py.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "serving/metrics/histogram.h"
#include "serving/metrics/prometheus_text.h"
#include "serving/metrics/server_metrics.h"

using namespace mrcnn::serving;

namespace {

// Series ("name{labels}") -> value, checking every line against the text format's grammar:
// comments are `# HELP name ...` or `# TYPE name counter|gauge|histogram`, a family's TYPE
// comes before its samples, a series appears once.
std::map<std::string, std::string> ParseExposition(const std::string& text) {
  static const std::regex comment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? )"
      R"((-?[0-9.e+-]+|[+-]Inf|NaN))");
  std::map<std::string, std::string> series;
  std::set<std::string> typed;
  std::istringstream lines(text);
  std::string line;
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  while (std::getline(lines, line)) {
    std::smatch match;
    if (line.starts_with("#")) {
      INFO(line);
      REQUIRE(std::regex_match(line, match, comment));
      if (match[1] == "TYPE") {
        CHECK(std::set<std::string>{"counter", "gauge", "histogram"}.count(match[3]) == 1);
        CHECK(typed.insert(match[2]).second);
      }
      continue;
    }
    INFO(line);
    REQUIRE(std::regex_match(line, match, sample));
    std::string family = match[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!typed.count(family) && family.ends_with(suffix)) {
        family.resize(family.size() - std::string(suffix).size());
      }
    }
    CHECK(typed.count(family) == 1);
    const size_t space = line.rfind(' ');
    CHECK(series.emplace(line.substr(0, space), line.substr(space + 1)).second);
  }
  return series;
}

}  // namespace

TEST_CASE("histogram buckets are cumulative and a value on a bound falls in it",
          "[serving][metrics]") {
  Histogram histogram({0.1, 1, 10});
  for (const double value : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0, 50.0}) {
    histogram.Observe(value);
  }
  const Histogram::Snapshot snapshot = histogram.Read();
  CHECK(snapshot.cumulative == std::vector<uint64_t>{2, 4, 5, 7});
  CHECK(snapshot.count == 7);
  CHECK(snapshot.sum == Approx(106.65));
  CHECK_THROWS_AS(Histogram({1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(Histogram({2, 1}), std::invalid_argument);
  CHECK_THROWS_AS(Histogram({1, std::numeric_limits<double>::infinity()}), std::invalid_argument);
}

TEST_CASE("the text format escapes labels and help and spells numbers as Prometheus reads them",
          "[serving][metrics]") {
  CHECK(FormatMetricValue(0.001) == "0.001");
  CHECK(FormatMetricValue(1) == "1");
  CHECK(FormatMetricValue(2.5) == "2.5");
  CHECK(FormatMetricValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatMetricValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(FormatMetricValue(std::nan("")) == "NaN");

  PrometheusText out;
  out.Family("demo_total", "counter", "a \\ back\nslash");
  out.Sample("demo_total", {{"path", "a\"b\\c\nd"}, {"code", "200"}}, uint64_t{3});
  out.Family("demo_seconds", "histogram", "h");
  Histogram histogram({0.5});
  histogram.Observe(0.25);
  histogram.Observe(2);
  out.HistogramSamples("demo_seconds", {{"route", "/x"}}, histogram.Read());
  CHECK(out.text() ==
        "# HELP demo_total a \\\\ back\\nslash\n"
        "# TYPE demo_total counter\n"
        "demo_total{path=\"a\\\"b\\\\c\\nd\",code=\"200\"} 3\n"
        "# HELP demo_seconds h\n"
        "# TYPE demo_seconds histogram\n"
        "demo_seconds_bucket{route=\"/x\",le=\"0.5\"} 1\n"
        "demo_seconds_bucket{route=\"/x\",le=\"+Inf\"} 2\n"
        "demo_seconds_sum{route=\"/x\"} 2.25\n"
        "demo_seconds_count{route=\"/x\"} 2\n");
  ParseExposition(out.text());
}

TEST_CASE("ServerMetrics renders what it was told, in the format's grammar", "[serving][metrics]") {
  ServerMetrics metrics;
  for (int i = 0; i < 3; ++i) {
    metrics.CountAnswer("POST", "/invocations", 200, 0.02);
  }
  metrics.CountAnswer("POST", "/invocations", 503, 0.001);
  metrics.CountAnswer("GET", kUnmatchedRoute, 404, 0.0001);
  metrics.CountAnswer("POST", "/models/{name}/invoke", 200, 3.0);
  metrics.ObserveQueueWait(0.004);
  metrics.ObserveQueueWait(0.2);
  metrics.ObserveBatch(3, 0.15);
  metrics.ObserveBatch(1, 0.05);
  metrics.AddQueued(5);
  metrics.AddQueued(-2);

  ServerMetrics::Live live;
  live.state = ServerMetrics::ModelState::kReady;
  live.models_loaded = 2;
  live.in_flight = 7;
  const auto series = ParseExposition(metrics.Render(live));
  const auto at = [&series](const std::string& key) {
    INFO(key);
    REQUIRE(series.count(key) == 1);
    return series.at(key);
  };
  CHECK(at(R"(mrcnn_http_requests_total{method="POST",route="/invocations",code="200"})") == "3");
  CHECK(at(R"(mrcnn_http_requests_total{method="POST",route="/invocations",code="503"})") == "1");
  CHECK(at(R"(mrcnn_http_requests_total{method="GET",route="unmatched",code="404"})") == "1");
  CHECK(
      at(R"(mrcnn_http_requests_total{method="POST",route="/models/{name}/invoke",code="200"})") ==
      "1");
  CHECK(at(R"(mrcnn_http_request_duration_seconds_count{route="/invocations"})") == "4");
  CHECK(at(R"(mrcnn_http_request_duration_seconds_bucket{route="/invocations",le="0.001"})") ==
        "1");
  CHECK(at(R"(mrcnn_http_request_duration_seconds_bucket{route="/invocations",le="0.025"})") ==
        "4");
  CHECK(
      at(R"(mrcnn_http_request_duration_seconds_bucket{route="/models/{name}/invoke",le="2.5"})") ==
      "0");
  CHECK(at(R"(mrcnn_http_request_duration_seconds_bucket{route="/models/{name}/invoke",le="5"})") ==
        "1");
  CHECK(at("mrcnn_inference_queue_wait_seconds_count") == "2");
  CHECK(at(R"(mrcnn_inference_queue_wait_seconds_bucket{le="0.005"})") == "1");
  CHECK(at("mrcnn_inference_batch_images_sum") == "4");
  CHECK(at(R"(mrcnn_inference_batch_images_bucket{le="1"})") == "1");
  CHECK(at(R"(mrcnn_inference_batch_images_bucket{le="4"})") == "2");
  CHECK(at("mrcnn_inference_model_seconds_count") == "2");
  CHECK(std::stod(at("mrcnn_inference_model_seconds_sum")) == Approx(0.2));
  CHECK(at("mrcnn_inference_queue_depth") == "3");
  CHECK(at("mrcnn_http_requests_in_flight") == "7");
  CHECK(at("mrcnn_models_loaded") == "2");
  CHECK(at(R"(mrcnn_model_state{state="ready"})") == "1");
  CHECK(at(R"(mrcnn_model_state{state="loading"})") == "0");
  CHECK(at(R"(mrcnn_model_state{state="draining"})") == "0");
  CHECK(std::stod(at("process_resident_memory_bytes")) > 1e6);
  CHECK(std::stod(at("process_virtual_memory_bytes")) >=
        std::stod(at("process_resident_memory_bytes")));
  CHECK(std::stod(at("process_open_fds")) >= 3);
  CHECK(std::stod(at("process_cpu_seconds_total")) >= 0);
  // Started within the last day, per the wall clock.
  const double now = static_cast<double>(std::time(nullptr));
  CHECK(std::stod(at("process_start_time_seconds")) <= now + 1);
  CHECK(std::stod(at("process_start_time_seconds")) > now - 86400);
}

TEST_CASE("the queue depth never renders negative", "[serving][metrics]") {
  ServerMetrics metrics;
  metrics.AddQueued(-1);
  const std::string text = metrics.Render({});
  CHECK(text.find("\nmrcnn_inference_queue_depth 0\n") != std::string::npos);
  CHECK(text.find("\nmrcnn_model_state{state=\"loading\"} 1\n") != std::string::npos);
}
