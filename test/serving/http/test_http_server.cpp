// Integration tests: real server processes over real HTTP on loopback (routes, content
// types, options, readiness, concurrency, drain).
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "serving/codec/base64.h"
#include "test/serving/server_process.h"
#include "test/serving/test_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// 64x48, green square in the top-left cell: the statistics predictor reports exactly one
// "green" detection with box [10, 5, 30, 20] and score 149/255.
cv::Mat GreenSquare() {
  return CanvasWithRectangle(64, 48, 10, 5, 30, 20, 0, 255, 0);
}

void CheckGreenSquare(const json& image) {
  CHECK(image["height"] == 48);
  CHECK(image["width"] == 64);
  REQUIRE(image["detections"].size() == 1);
  const json& detection = image["detections"][0];
  CHECK(detection["label"] == "green");
  CHECK(detection["category_id"] == 2);
  CHECK(detection["box"] == json::array({10.0, 5.0, 30.0, 20.0}));
  CHECK(detection["score"].get<double>() == Approx(149.0 / 255.0));
  CHECK(detection["mask"]["size"] == json::array({48, 64}));
  CHECK(detection["mask"]["counts"].is_string());
}

std::string JsonImage(const cv::Mat& image) {
  const auto png = Encode(image, ".png");
  return EncodeBase64(png.data(), png.size());
}

}  // namespace

TEST_CASE("every route and content type answers as documented", "[serving][http]") {
  ServerProcess server({}, json::object(),
                       {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "5"},
                        {"SAGEMAKER_BATCH_STRATEGY", "MULTI_RECORD"},
                        {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "3"}});
  server.WaitUntilReady();
  HttpConnection connection(server.port());

  const HttpReply ping = connection.Send("GET", "/ping");
  CHECK(ping.status == 200);
  CHECK(ping.body.empty());
  CHECK(ping.keep_alive);

  const HttpReply parameters = connection.Send("GET", "/execution-parameters");
  REQUIRE(parameters.status == 200);
  CHECK(json::parse(parameters.body) == json{{"MaxConcurrentTransforms", 3},
                                             {"BatchStrategy", "MULTI_RECORD"},
                                             {"MaxPayloadInMB", 5}});

  const cv::Mat image = GreenSquare();
  for (const auto& [type, extension] : std::vector<std::pair<std::string, std::string>>{
           {"image/png", ".png"}, {"application/x-image", ".png"}, {"image/jpeg", ".png"}}) {
    DYNAMIC_SECTION("raw " << type) {
      const HttpReply reply = connection.Send(
          "POST", "/invocations", AsString(Encode(image, extension)), {{"Content-Type", type}});
      REQUIRE(reply.status == 200);
      CHECK(reply.Header("content-type") == "application/json");
      CheckGreenSquare(json::parse(reply.body));
    }
  }
  SECTION("a JPEG (lossy: the box may move by a pixel)") {
    const HttpReply reply = connection.Send("POST", "/invocations", AsString(Encode(image, ".jpg")),
                                            {{"Content-Type", "image/jpeg"}});
    REQUIRE(reply.status == 200);
    const json body = json::parse(reply.body);
    REQUIRE(body["detections"].size() >= 1);
    CHECK(body["detections"][0]["label"] == "green");
    CHECK(body["detections"][0]["box"][0].get<double>() == Approx(10).margin(1));
    CHECK(body["detections"][0]["box"][3].get<double>() == Approx(20).margin(1));
  }
  SECTION("JSON, one image") {
    const HttpReply reply =
        connection.Send("POST", "/invocations", json{{"image", JsonImage(image)}}.dump(),
                        {{"Content-Type", "application/json"}, {"Accept", "application/json"}});
    REQUIRE(reply.status == 200);
    CheckGreenSquare(json::parse(reply.body));
  }
  SECTION("JSON, instances and bare list forms") {
    const cv::Mat red = CanvasWithRectangle(40, 40, 22, 22, 38, 30, 255, 0, 0);
    const json instances = {
        {"instances", {{{"image", JsonImage(image)}}, {{"image", JsonImage(red)}}}}};
    for (const json& body : {instances, instances["instances"]}) {
      const HttpReply reply = connection.Send("POST", "/invocations", body.dump(),
                                              {{"Content-Type", "application/json"}});
      REQUIRE(reply.status == 200);
      const json predictions = json::parse(reply.body)["predictions"];
      REQUIRE(predictions.size() == 2);
      CheckGreenSquare(predictions[0]);
      REQUIRE(predictions[1]["detections"].size() == 1);
      CHECK(predictions[1]["detections"][0]["label"] == "red");
      CHECK(predictions[1]["detections"][0]["box"] == json::array({22.0, 22.0, 38.0, 30.0}));
    }
  }
  SECTION("custom attributes are applied and echoed") {
    const std::string attributes = "masks=none,trace=abc-123";
    HttpReply reply = connection.Send(
        "POST", "/invocations", AsString(Encode(image, ".png")),
        {{"Content-Type", "image/png"}, {"X-Amzn-SageMaker-Custom-Attributes", attributes}});
    REQUIRE(reply.status == 200);
    CHECK(reply.Header("x-amzn-sagemaker-custom-attributes") == attributes);
    const json body = json::parse(reply.body);
    REQUIRE(body["detections"].size() == 1);
    CHECK_FALSE(body["detections"][0].contains("mask"));

    reply = connection.Send("POST", "/invocations", AsString(Encode(image, ".png")),
                            {{"Content-Type", "image/png"},
                             {"X-Amzn-SageMaker-Custom-Attributes", "score_threshold=0.6"}});
    REQUIRE(reply.status == 200);
    CHECK(json::parse(reply.body)["detections"].empty());  // 149/255 = 0.584 < 0.6

    const cv::Mat two = CanvasWithRectangle(64, 48, 40, 30, 50, 40, 255, 255, 255);
    cv::Mat both = two.clone();
    both(cv::Rect(10, 5, 20, 15)).setTo(cv::Scalar(0, 255, 0));
    reply = connection.Send("POST", "/invocations", AsString(Encode(both, ".png")),
                            {{"Content-Type", "image/png"},
                             {"X-Amzn-SageMaker-Custom-Attributes", "max_detections=1"}});
    REQUIRE(reply.status == 200);
    const json limited = json::parse(reply.body);
    REQUIRE(limited["detections"].size() == 1);
    CHECK(limited["detections"][0]["score"].get<double>() == Approx(1.0));  // the white one
  }
  SECTION("no Accept header and */* are fine") {
    const HttpReply reply = connection.Send("POST", "/invocations", AsString(Encode(image, ".png")),
                                            {{"Content-Type", "image/png"}, {"Accept", "*/*"}});
    CHECK(reply.status == 200);
  }
}

TEST_CASE("/ping is 503 until the model is loaded and warmed up", "[serving][http]") {
  ServerProcess server({}, json{{"load_delay_ms", 1000}, {"warmup_delay_ms", 1000}});
  const auto started = std::chrono::steady_clock::now();
  const HttpReply early = Request(server.port(), "GET", "/ping");
  CHECK(early.status == 503);
  CHECK(json::parse(early.body)["error"] == "not_ready");
  const HttpReply invocation =
      Request(server.port(), "POST", "/invocations", AsString(Encode(GreenSquare(), ".png")),
              {{"Content-Type", "image/png"}});
  CHECK(invocation.status == 503);
  CHECK(json::parse(invocation.body)["error"] == "not_ready");
  server.WaitUntilReady();
  // Load (1 s) and warm-up (1 s) both had to finish first.
  CHECK(std::chrono::steady_clock::now() - started >= 1800ms);
  CHECK(Request(server.port(), "GET", "/ping").status == 200);
}

TEST_CASE("/ping answers in milliseconds while the model is busy", "[serving][http]") {
  ServerProcess server({"--max-batch", "1"}, json{{"batch_delay_ms", 1500}});
  server.WaitUntilReady(30s);
  auto busy = std::async(std::launch::async, [&] {
    return Request(server.port(), "POST", "/invocations", AsString(Encode(GreenSquare(), ".png")),
                   {{"Content-Type", "image/png"}});
  });
  std::this_thread::sleep_for(200ms);
  HttpConnection connection(server.port());
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    CHECK(connection.Send("GET", "/ping").status == 200);
    CHECK(std::chrono::steady_clock::now() - start < 100ms);
  }
  CHECK(busy.get().status == 200);
}

TEST_CASE("200 concurrent keep-alive connections all succeed", "[serving][http][load]") {
  ServerProcess server({"--max-batch", "8", "--batch-wait-ms", "2", "--max-inflight", "256",
                        "--queue-capacity", "256"},
                       json::object());
  server.WaitUntilReady();
  const std::string png = AsString(Encode(GreenSquare(), ".png"));
  constexpr int kConnections = 200;
  constexpr int kRequestsEach = 3;
  std::atomic<int> ok{0}, failed{0}, batched{0};
  std::vector<std::thread> clients;
  std::atomic<bool> go{false};
  for (int c = 0; c < kConnections; ++c) {
    clients.emplace_back([&] {
      try {
        HttpConnection connection(server.port());
        while (!go.load()) {
          std::this_thread::yield();
        }
        for (int r = 0; r < kRequestsEach; ++r) {
          const HttpReply reply =
              connection.Send("POST", "/invocations", png, {{"Content-Type", "image/png"}}, 60s);
          if (reply.status == 200 && reply.keep_alive &&
              json::parse(reply.body)["detections"].size() == 1) {
            ++ok;
            if (std::stoi(reply.Header("x-mrcnn-batch-images")) > 1) {
              ++batched;
            }
          } else {
            ++failed;
          }
        }
      } catch (const std::exception& e) {
        ++failed;
        UNSCOPED_INFO("client error: " << e.what());
      }
    });
  }
  go = true;
  for (auto& client : clients) {
    client.join();
  }
  CHECK(failed.load() == 0);
  CHECK(ok.load() == kConnections * kRequestsEach);
  CHECK(batched.load() > 0);  // dynamic batching actually combined requests
}

TEST_CASE("SIGTERM drains: in-flight requests finish, then exit 0", "[serving][http][drain]") {
  ServerProcess server({"--max-batch", "1"}, json{{"batch_delay_ms", 1000}});
  server.WaitUntilReady(30s);
  HttpConnection idle(server.port());  // an idle keep-alive connection must not block drain
  CHECK(idle.Send("GET", "/ping").status == 200);
  const std::string png = AsString(Encode(GreenSquare(), ".png"));
  auto first = std::async(std::launch::async, [&] {
    return Request(server.port(), "POST", "/invocations", png, {{"Content-Type", "image/png"}});
  });
  auto second = std::async(std::launch::async, [&] {
    return Request(server.port(), "POST", "/invocations", png, {{"Content-Type", "image/png"}});
  });
  std::this_thread::sleep_for(300ms);
  const auto signalled = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  const HttpReply a = first.get();
  const HttpReply b = second.get();
  CHECK(a.status == 200);
  CHECK(b.status == 200);  // queued behind the first, still served
  CHECK_FALSE(a.keep_alive);
  const auto exit_status = server.WaitForExit(10s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 0);
  CHECK(std::chrono::steady_clock::now() - signalled < 5s);
  CHECK_THROWS(Request(server.port(), "GET", "/ping"));  // no longer accepting
  CHECK(server.Log().find("drained") != std::string::npos);
}

TEST_CASE("SIGTERM drains a predictor with two batches in flight", "[serving][http][drain]") {
  // Each batch: 300 ms to start, 700 ms to finish, the next one starting meanwhile.
  ServerProcess server({"--max-batch", "1"},
                       json{{"batch_delay_ms", 300}, {"finish_delay_ms", 700}});
  server.WaitUntilReady(30s);
  const std::string png = AsString(Encode(GreenSquare(), ".png"));
  std::vector<std::future<HttpReply>> replies;
  for (int i = 0; i < 3; ++i) {
    replies.push_back(std::async(std::launch::async, [&] {
      return Request(server.port(), "POST", "/invocations", png, {{"Content-Type", "image/png"}});
    }));
  }
  std::this_thread::sleep_for(450ms);  // the first finishing, the second starting
  server.Signal(SIGTERM);
  for (auto& reply : replies) {
    const HttpReply r = reply.get();
    CHECK(r.status == 200);
    CHECK(json::parse(r.body)["detections"].size() == 1);
  }
  const auto exit_status = server.WaitForExit(10s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 0);
  CHECK(server.Log().find("drained") != std::string::npos);
}

TEST_CASE("while draining /ping is 503 on an open connection", "[serving][http][drain]") {
  ServerProcess server({"--max-batch", "1"}, json{{"batch_delay_ms", 800}});
  server.WaitUntilReady(30s);
  // Connected and sent from this thread before the signal (a request on a thread of its own
  // could still be connecting when the listener closes, on a loaded machine).
  const std::string png = AsString(Encode(GreenSquare(), ".png"));
  RawConnection inflight(server.port());
  inflight.Write(
      "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: " +
      std::to_string(png.size()) + "\r\n\r\n" + png);
  std::this_thread::sleep_for(200ms);
  // Headers sent before the signal, so this connection is mid-request when drain starts.
  RawConnection raw(server.port());
  raw.Write("GET /ping HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(100ms);
  server.Signal(SIGTERM);
  std::this_thread::sleep_for(100ms);
  raw.Write("\r\n");
  const HttpReply ping = raw.ReadResponse(5s);
  CHECK(ping.status == 503);
  CHECK(json::parse(ping.body)["error"] == "draining");
  CHECK(inflight.ReadResponse(10s).status == 200);
  const auto exit_status = server.WaitForExit(10s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 0);
}

TEST_CASE("a model that cannot load makes the server exit 1 with the reason", "[serving][http]") {
  ServerProcess server({}, json{{"fail_load", true}, {"load_delay_ms", 300}});
  const auto exit_status = server.WaitForExit(10s);
  REQUIRE(exit_status);
  CHECK(*exit_status == 1);
  CHECK(server.Log().find("model load failed") != std::string::npos);
}
