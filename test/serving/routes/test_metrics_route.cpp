// Integration tests: GET /metrics on a real server process over loopback. Every request this
// test sends shows up in the counters exactly once, under its route pattern and status; the
// executor's batches show up in the histograms; the state follows loading, ready and drain; a
// multi-model endpoint counts its loaded models. (Prometheus itself scrapes the server in
// test_server_prometheus.py.)
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "serving/codec/base64.h"
#include "test/serving/server_process.h"
#include "test/serving/test_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// "name{labels}" -> value of every sample line.
std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

std::map<std::string, double> Scrape(uint16_t port) {
  const HttpReply reply = Request(port, "GET", "/metrics");
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  CHECK(reply.Header("content-type") == "text/plain; version=0.0.4; charset=utf-8");
  return ParseSamples(reply.body);
}

double Value(const std::map<std::string, double>& samples, const std::string& series) {
  const auto it = samples.find(series);
  return it == samples.end() ? 0.0 : it->second;
}

std::string Requests(const std::string& method, const std::string& route, int code) {
  return "mrcnn_http_requests_total{method=\"" + method + "\",route=\"" + route + "\",code=\"" +
         std::to_string(code) + "\"}";
}

std::string GreenPng() {
  return AsString(Encode(CanvasWithRectangle(64, 48, 10, 5, 30, 20, 0, 255, 0), ".png"));
}

}  // namespace

TEST_CASE("/metrics counts every answer by route and status, and the executor's batches",
          "[serving][http][metrics]") {
  ServerProcess server({"--max-batch", "4"}, json::object());
  server.WaitUntilReady();
  const uint16_t port = server.port();
  const auto before = Scrape(port);

  const std::map<std::string, std::string> png = {{"Content-Type", "image/png"}};
  for (int i = 0; i < 5; ++i) {
    REQUIRE(Request(port, "POST", "/invocations", GreenPng(), png).status == 200);
  }
  const std::string image =
      EncodeBase64(reinterpret_cast<const uint8_t*>(GreenPng().data()), GreenPng().size());
  const json three = {{"instances", {{{"image", image}}, {{"image", image}}, {{"image", image}}}}};
  REQUIRE(
      Request(port, "POST", "/invocations", three.dump(), {{"Content-Type", "application/json"}})
          .status == 200);
  REQUIRE(Request(port, "POST", "/invocations", "x", {{"Content-Type", "text/csv"}}).status == 415);
  REQUIRE(Request(port, "GET", "/nope").status == 404);
  REQUIRE(Request(port, "GET", "/nope/either?x=1").status == 404);
  REQUIRE(Request(port, "GET", "/invocations").status == 405);
  REQUIRE(Request(port, "GET", "/ping").status == 200);
  REQUIRE(Request(port, "GET", "/execution-parameters").status == 200);

  const auto after = Scrape(port);
  const auto delta = [&](const std::string& series) {
    INFO(series);
    return Value(after, series) - Value(before, series);
  };
  CHECK(delta(Requests("POST", "/invocations", 200)) == 6);
  CHECK(delta(Requests("POST", "/invocations", 415)) == 1);
  CHECK(delta(Requests("GET", "unmatched", 404)) == 2);
  CHECK(delta(Requests("GET", "unmatched", 405)) == 1);
  CHECK(delta(Requests("GET", "/ping", 200)) == 1);
  CHECK(delta(Requests("GET", "/execution-parameters", 200)) == 1);
  CHECK(delta(Requests("GET", "/metrics", 200)) == 1);  // the first scrape
  CHECK(delta("mrcnn_http_request_duration_seconds_count{route=\"/invocations\"}") == 7);
  CHECK(delta("mrcnn_http_request_duration_seconds_bucket{route=\"/invocations\",le=\"+Inf\"}") ==
        7);
  // Six jobs reached the model, eight images in all, in one batch each (sent one at a time).
  CHECK(delta("mrcnn_inference_queue_wait_seconds_count") == 6);
  CHECK(delta("mrcnn_inference_batch_images_count") == 6);
  CHECK(delta("mrcnn_inference_batch_images_sum") == 8);
  CHECK(delta("mrcnn_inference_model_seconds_count") == 6);
  CHECK(Value(after, "mrcnn_inference_queue_depth") == 0);
  // A request holds its admission until its last stage lets go, which may be just after its
  // answer went out: the gauge reaches 0 within moments, not necessarily before the scrape.
  double in_flight = Value(after, "mrcnn_http_requests_in_flight");
  for (int i = 0; i < 100 && in_flight != 0; ++i) {
    std::this_thread::sleep_for(50ms);
    in_flight = Value(Scrape(port), "mrcnn_http_requests_in_flight");
  }
  CHECK(in_flight == 0);
  CHECK(Value(after, "mrcnn_model_state{state=\"ready\"}") == 1);
  CHECK(Value(after, "mrcnn_model_state{state=\"loading\"}") == 0);
  CHECK(Value(after, "mrcnn_models_loaded") == 1);
  CHECK(Value(after, "process_resident_memory_bytes") > 1e6);
  CHECK(Value(after, "process_start_time_seconds") > 1.6e9);
}

TEST_CASE("/metrics answers while the model loads and while draining", "[serving][http][metrics]") {
  ServerProcess server({"--max-batch", "1"},
                       json{{"load_delay_ms", 1500}, {"batch_delay_ms", 800}});
  const auto loading = Scrape(server.port());
  CHECK(Value(loading, "mrcnn_model_state{state=\"loading\"}") == 1);
  CHECK(Value(loading, "mrcnn_model_state{state=\"ready\"}") == 0);
  CHECK(Value(loading, "mrcnn_models_loaded") == 0);
  server.WaitUntilReady(30s);

  // As the drain test does: a request in flight holds the drain open, and a scrape whose
  // headers were sent before the signal is answered during it.
  const std::string png = GreenPng();
  RawConnection inflight(server.port());
  inflight.Write(
      "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: " +
      std::to_string(png.size()) + "\r\n\r\n" + png);
  std::this_thread::sleep_for(200ms);
  RawConnection raw(server.port());
  raw.Write("GET /metrics HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(100ms);
  server.Signal(SIGTERM);
  std::this_thread::sleep_for(100ms);
  raw.Write("\r\n");
  const HttpReply draining = raw.ReadResponse(5s);
  REQUIRE(draining.status == 200);
  const auto samples = ParseSamples(draining.body);
  CHECK(Value(samples, "mrcnn_model_state{state=\"draining\"}") == 1);
  CHECK(Value(samples, "mrcnn_model_state{state=\"ready\"}") == 0);
  CHECK(Value(samples, "mrcnn_http_requests_in_flight") == 1);
  CHECK(inflight.ReadResponse(10s).status == 200);
  const auto exit_status = server.WaitForExit(10s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 0);
}

TEST_CASE("/metrics on a multi-model endpoint: loaded models and the invoke route",
          "[serving][http][metrics][mme]") {
  std::string pattern = (fs::temp_directory_path() / "metrics-models-XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  const fs::path root = pattern;
  for (const char* name : {"a", "b"}) {
    fs::create_directories(root / name);
    std::ofstream(root / name / "statistics_predictor.json") << "{}";
  }
  {
    ServerProcess server({}, json::object(),
                         {{"SAGEMAKER_MULTI_MODEL", "True"}, {"MRCNN_MME_WORKSPACE_MB", "0"}});
    server.WaitUntilReady();
    const uint16_t port = server.port();
    CHECK(Value(Scrape(port), "mrcnn_models_loaded") == 0);
    for (const char* name : {"a", "b"}) {
      REQUIRE(Request(port, "POST", "/models",
                      json{{"model_name", name}, {"url", (root / name).string()}}.dump(),
                      {{"Content-Type", "application/json"}})
                  .status == 200);
    }
    REQUIRE(Request(port, "POST", "/models/a/invoke", GreenPng(), {{"Content-Type", "image/png"}})
                .status == 200);
    REQUIRE(Request(port, "POST", "/models/b/invoke", GreenPng(), {{"Content-Type", "image/png"}})
                .status == 200);
    REQUIRE(Request(port, "POST", "/models/c/invoke", GreenPng(), {{"Content-Type", "image/png"}})
                .status == 404);
    const auto loaded = Scrape(port);
    CHECK(Value(loaded, "mrcnn_models_loaded") == 2);
    CHECK(Value(loaded, Requests("POST", "/models/{name}/invoke", 200)) == 2);
    CHECK(Value(loaded, Requests("POST", "/models/{name}/invoke", 404)) == 1);
    CHECK(Value(loaded, Requests("POST", "/models", 200)) == 2);
    CHECK(Value(loaded, "mrcnn_inference_batch_images_count") == 2);
    REQUIRE(Request(port, "DELETE", "/models/a").status == 200);
    CHECK(Value(Scrape(port), "mrcnn_models_loaded") == 1);
  }
  fs::remove_all(root);
}
