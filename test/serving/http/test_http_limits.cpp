// Integration tests: every error status with its JSON body, payload limits, timeouts and
// slow clients, against a real server process on loopback.
#include <catch2/catch.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "serving/codec/base64.h"
#include "test/serving/server_process.h"
#include "test/serving/test_images.h"
#include "test/trainer/data/damaged_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string Png(int width = 64, int height = 48) {
  return AsString(Encode(CanvasWithRectangle(width, height, 10, 5, 30, 20, 0, 255, 0), ".png"));
}

// The body is JSON {"error": code, "detail": non-empty}.
void CheckError(const HttpReply& reply, unsigned status, const std::string& code) {
  INFO("body: " << reply.body);
  CHECK(reply.status == status);
  CHECK(reply.Header("content-type") == "application/json");
  const json body = json::parse(reply.body);
  CHECK(body["error"] == code);
  CHECK_FALSE(body["detail"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("client mistakes are 4xx with a JSON reason", "[serving][http][errors]") {
  ServerProcess server({"--max-image-pixels", "10000", "--max-payload-mb", "1"}, json::object());
  server.WaitUntilReady();
  HttpConnection connection(server.port());
  const std::map<std::string, std::string> png_type = {{"Content-Type", "image/png"}};

  CheckError(connection.Send("GET", "/nowhere"), 404, "not_found");
  HttpReply wrong_method = connection.Send("POST", "/ping", "x", {{"Content-Type", "text/plain"}});
  CheckError(wrong_method, 405, "method_not_allowed");
  CHECK(wrong_method.Header("allow") == "GET");
  CHECK(wrong_method.keep_alive);  // its small body was read, the connection lives on
  CheckError(Request(server.port(), "GET", "/invocations"), 405, "method_not_allowed");

  CheckError(Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "text/csv"}}),
             415, "unsupported_media_type");
  CheckError(Request(server.port(), "POST", "/invocations", Png(), {}), 415,
             "unsupported_media_type");
  CheckError(Request(server.port(), "POST", "/invocations", Png(),
                     {{"Content-Type", "image/png"}, {"Accept", "image/png"}}),
             406, "not_acceptable");

  // A well-formed request whose body is read stays on the same keep-alive connection.
  CheckError(connection.Send("POST", "/invocations", "", png_type), 400, "empty_image");
  CheckError(connection.Send("POST", "/invocations", "this is not an image", png_type), 400,
             "undecodable_image");
  std::string truncated = Png();
  truncated.resize(truncated.size() - 30);
  CheckError(connection.Send("POST", "/invocations", truncated, png_type), 400,
             "undecodable_image");
  CheckError(connection.Send("POST", "/invocations", Png(200, 100), png_type), 400,
             "image_too_large");  // 20000 pixels > --max-image-pixels 10000
  const std::map<std::string, std::string> json_type = {{"Content-Type", "application/json"}};
  CheckError(connection.Send("POST", "/invocations", "{\"image\": ", json_type), 400,
             "bad_json_body");
  CheckError(connection.Send("POST", "/invocations", "{\"image\": \"###\"}", json_type), 400,
             "bad_base64");
  CheckError(connection.Send("POST", "/invocations", "{\"instances\": []}", json_type), 400,
             "bad_json_body");
  HttpReply bad_attributes = connection.Send(
      "POST", "/invocations", Png(),
      {{"Content-Type", "image/png"}, {"X-Amzn-SageMaker-Custom-Attributes", "score_threshold=2"}});
  CheckError(bad_attributes, 400, "bad_custom_attributes");
  CHECK(connection.Send("GET", "/ping").status == 200);  // the connection survived them all
}

TEST_CASE("truncated or corrupt images are 400, never 200 on filled-in pixels",
          "[serving][http][errors][bad-data]") {
  using namespace mrcnn::testing;
  ServerProcess server({}, json::object());
  server.WaitUntilReady();
  HttpConnection connection(server.port());
  const cv::Mat noisy = NoisyBgr(128, 96, 5);
  const auto jpeg = Encode(noisy, ".jpg");
  const auto png = Encode(noisy, ".png");
  const std::map<std::string, std::string> jpeg_type = {{"Content-Type", "image/jpeg"}};
  const std::map<std::string, std::string> png_type = {{"Content-Type", "image/png"}};

  // The intact images are answered.
  for (const auto& [bytes, type] : {std::pair{jpeg, jpeg_type}, std::pair{png, png_type}}) {
    const HttpReply reply = connection.Send("POST", "/invocations", AsString(bytes), type);
    INFO("body: " << reply.body);
    REQUIRE(reply.status == 200);
    CHECK(json::parse(reply.body)["width"] == 128);
  }
  // Damaged copies of them are not, and the reason says what is wrong.
  const std::vector<std::tuple<std::string, std::vector<uint8_t>, std::string>> damaged = {
      {"the first 700 bytes of a JPEG", FirstBytes(jpeg, 700),
       "the JPEG data is truncated or corrupt: Premature end of JPEG file"},
      {"a JPEG with noise over its middle", NoiseOverMiddle(jpeg),
       "the JPEG data is truncated or corrupt: Corrupt JPEG data: "},
      {"a PNG with one CRC byte flipped", FlipPngCrcByte(png, "IDAT"),
       "the PNG data is corrupt: CRC mismatch in the IDAT chunk"},
      {"a truncated PNG", FirstBytes(png, png.size() / 2), "the PNG data is truncated: "},
  };
  for (const auto& [name, bytes, detail] : damaged) {
    INFO(name);
    const bool is_png = bytes[1] == 'P';
    const HttpReply reply =
        connection.Send("POST", "/invocations", AsString(bytes), is_png ? png_type : jpeg_type);
    CheckError(reply, 400, "undecodable_image");
    CHECK_THAT(json::parse(reply.body)["detail"].get<std::string>(), Catch::StartsWith(detail));
    // The same image base64-encoded in a JSON body.
    const HttpReply from_json = connection.Send(
        "POST", "/invocations", json{{"image", EncodeBase64(bytes.data(), bytes.size())}}.dump(),
        {{"Content-Type", "application/json"}});
    CheckError(from_json, 400, "undecodable_image");
    CHECK_THAT(json::parse(from_json.body)["detail"].get<std::string>(), Catch::StartsWith(detail));
  }
  CHECK(connection.Send("GET", "/ping").status == 200);  // the connection survived them all
}

TEST_CASE("bodies over the payload limit are 413 without reading them", "[serving][http][errors]") {
  ServerProcess server({"--max-payload-mb", "1"}, json::object());
  server.WaitUntilReady();

  SECTION("declared by Content-Length, body never sent") {
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Content-Length: 104857600\r\n\r\n");
    const HttpReply reply = raw.ReadResponse(5s);
    CheckError(reply, 413, "payload_too_large");
    CHECK(json::parse(reply.body)["detail"].get<std::string>().find("104857600") !=
          std::string::npos);
    CHECK_FALSE(reply.keep_alive);
  }
  SECTION("declared, and the client sends anyway") {
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Content-Length: 3145728\r\n\r\n");
    raw.TryWrite(std::string(256 * 1024, 'x'));
    CheckError(raw.ReadResponse(5s), 413, "payload_too_large");
  }
  SECTION("chunked, discovered while reading") {
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Transfer-Encoding: chunked\r\n\r\n");
    const std::string chunk(256 * 1024, 'x');
    for (int i = 0; i < 5; ++i) {
      if (!raw.TryWrite("40000\r\n" + chunk + "\r\n")) {
        break;
      }
    }
    CheckError(raw.ReadResponse(5s), 413, "payload_too_large");
  }
  SECTION("Expect: 100-continue gets the 413 instead of the go-ahead") {
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n");
    CheckError(raw.ReadResponse(5s), 413, "payload_too_large");
  }
  SECTION("Expect: 100-continue within the limit is served") {
    const std::string png = Png();
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Expect: 100-continue\r\nContent-Length: " +
        std::to_string(png.size()) + "\r\n\r\n");
    CHECK(raw.ReadResponse(5s).status == 100);
    raw.Write(png);
    CHECK(raw.ReadResponse(5s).status == 200);
  }
  CHECK(Request(server.port(), "GET", "/ping").status == 200);
}

TEST_CASE("our own failures are 500, overload is 503", "[serving][http][errors]") {
  SECTION("the model throws") {
    ServerProcess server({}, json{{"fail_on_width", 33}});
    server.WaitUntilReady();
    CheckError(Request(server.port(), "POST", "/invocations", Png(33, 20),
                       {{"Content-Type", "image/png"}}),
               500, "inference_failed");
    CHECK(Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}})
              .status == 200);
  }
  SECTION("more requests than the server admits") {
    ServerProcess server({"--max-inflight", "1", "--max-batch", "1"},
                         json{{"batch_delay_ms", 1000}});
    server.WaitUntilReady(30s);
    auto busy = std::async(std::launch::async, [&] {
      return Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}});
    });
    std::this_thread::sleep_for(300ms);
    CheckError(
        Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}}), 503,
        "queue_full");
    CHECK(busy.get().status == 200);
  }
  SECTION("the inference queue is full") {
    ServerProcess server({"--queue-capacity", "1", "--max-batch", "1"},
                         json{{"batch_delay_ms", 1000}});
    server.WaitUntilReady(30s);
    auto running = std::async(std::launch::async, [&] {
      return Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}});
    });
    std::this_thread::sleep_for(300ms);
    auto queued = std::async(std::launch::async, [&] {
      return Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}});
    });
    std::this_thread::sleep_for(300ms);
    CheckError(
        Request(server.port(), "POST", "/invocations", Png(), {{"Content-Type", "image/png"}}), 503,
        "queue_full");
    CHECK(running.get().status == 200);
    CHECK(queued.get().status == 200);
  }
  SECTION("past the per-request deadline") {
    ServerProcess server({"--request-deadline-s", "0.5", "--max-batch", "1"},
                         json{{"batch_delay_ms", 1500}});
    server.WaitUntilReady(30s);
    const auto start = std::chrono::steady_clock::now();
    HttpConnection connection(server.port());
    CheckError(connection.Send("POST", "/invocations", Png(), {{"Content-Type", "image/png"}}), 503,
               "deadline_exceeded");
    CHECK(std::chrono::steady_clock::now() - start < 1200ms);  // answered at the deadline
    CHECK(connection.Send("GET", "/ping").status == 200);
  }
}

TEST_CASE("slow and idle clients time out without stalling others", "[serving][http][timeouts]") {
  ServerProcess server({"--header-timeout-s", "3", "--idle-timeout-s", "1", "--body-timeout-s", "2",
                        "--io-threads", "1"},
                       json::object());
  server.WaitUntilReady();

  SECTION("headers byte by byte do not stall other clients") {
    const std::string request =
        "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: a-very-slow-client\r\n\r\n";
    auto slow = std::async(std::launch::async, [&] {
      RawConnection raw(server.port());
      for (char c : request) {
        raw.Write(std::string(1, c));
        std::this_thread::sleep_for(20ms);
      }
      return raw.ReadResponse(5s);
    });
    // Meanwhile (one I/O thread!) everyone else is served promptly.
    std::this_thread::sleep_for(100ms);
    const std::string png = Png();
    for (int i = 0; i < 20; ++i) {
      const auto start = std::chrono::steady_clock::now();
      CHECK(Request(server.port(), "POST", "/invocations", png, {{"Content-Type", "image/png"}})
                .status == 200);
      CHECK(std::chrono::steady_clock::now() - start < 500ms);
    }
    CHECK(slow.get().status == 200);  // 74 bytes x 20 ms < the 3 s header timeout
  }
  SECTION("headers that never finish are cut off at the header timeout") {
    RawConnection raw(server.port());
    raw.Write("GET /ping HTTP/1.1\r\nHost: x\r\n");
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    raw.ReadUntilClosed(10s, &closed);
    CHECK(closed);
    CHECK(std::chrono::steady_clock::now() - start >= 2500ms);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("an idle keep-alive connection is closed at the idle timeout") {
    RawConnection raw(server.port());
    raw.Write("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(raw.ReadResponse(2s).status == 200);
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    raw.ReadUntilClosed(5s, &closed);
    CHECK(closed);
    CHECK(std::chrono::steady_clock::now() - start < 2500ms);
  }
  SECTION("a body that stops arriving is cut off") {
    RawConnection raw(server.port());
    raw.Write(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
        "Content-Length: 1000\r\n\r\nabc");
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    raw.ReadUntilClosed(10s, &closed);
    CHECK(closed);
    CHECK(std::chrono::steady_clock::now() - start < 4s);
  }
  SECTION("malformed request lines are 400") {
    RawConnection raw(server.port());
    raw.Write("NOT AN HTTP REQUEST\r\n\r\n");
    CheckError(raw.ReadResponse(5s), 400, "bad_request");
  }
  SECTION("pipelined requests are answered in order") {
    RawConnection raw(server.port());
    raw.Write(
        "GET /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /execution-parameters HTTP/1.1\r\n"
        "Host: x\r\n\r\n");
    CHECK(raw.ReadResponse(5s).status == 200);
    const HttpReply second = raw.ReadResponse(5s);
    CHECK(second.status == 200);
    CHECK(json::parse(second.body).contains("MaxPayloadInMB"));
  }
}
