// Integration tests: batch transform against a real server process on loopback. JSON Lines
// bodies as SageMaker sends them with SplitType Line + BatchStrategy MultiRecord: one answer
// line per input line, in order, ids echoed, a bad record failing alone; SAGEMAKER_BATCH in
// any case; /execution-parameters in AWS's spelling.
#include <catch2/catch.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serving/codec/base64.h"
#include "test/serving/server_process.h"
#include "test/serving/test_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::map<std::string, std::string> kJsonLines = {{"Content-Type", "application/jsonlines"}};

// width x 30 with a green rectangle [2, 12) x [2, 10) in its top-left cell: the statistics
// predictor finds exactly that rectangle, so the answer's width says which record it was.
std::string PngOfWidth(int width) {
  return AsString(Encode(CanvasWithRectangle(width, 30, 2, 2, 12, 10, 0, 255, 0), ".png"));
}

std::string Base64(const std::string& bytes) {
  return EncodeBase64(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string Record(int width, const json& id) {
  return json{{"image", Base64(PngOfWidth(width))}, {"id", id}}.dump();
}

// The answer's lines.
std::vector<json> AnswerLines(const HttpReply& reply) {
  INFO("body: " << reply.body.substr(0, 2000));
  REQUIRE(reply.status == 200);
  CHECK(reply.Header("content-type") == "application/jsonlines");
  // Lines separated by '\n', none after the last: SageMaker's AssembleWith=Line adds it.
  REQUIRE((reply.body.empty() || reply.body.back() != '\n'));
  std::vector<json> lines;
  if (reply.body.empty()) {
    return lines;
  }
  size_t start = 0;
  for (;;) {
    const size_t end = reply.body.find('\n', start);
    lines.push_back(json::parse(reply.body.substr(start, end - start)));
    if (end == std::string::npos) {
      return lines;
    }
    start = end + 1;
  }
}

void CheckDetected(const json& line, int width) {
  INFO(line.dump().substr(0, 300));
  CHECK(line["width"] == width);
  CHECK(line["height"] == 30);
  REQUIRE(line["detections"].size() == 1);
  CHECK(line["detections"][0]["label"] == "green");
  CHECK(line["detections"][0]["box"] == json::array({2.0, 2.0, 12.0, 10.0}));
}

void CheckErrorLine(const json& line, const std::string& code, const std::string& detail_part) {
  INFO(line.dump());
  CHECK(line["error"] == code);
  CHECK_THAT(line["detail"].get<std::string>(), Catch::Contains(detail_part));
  CHECK_FALSE(line.contains("detections"));
}

}  // namespace

TEST_CASE("multi-record JSON Lines: one answer line per input line, bad records fail alone",
          "[serving][http][batch]") {
  ServerProcess server({"--max-image-pixels", "10000"}, json::object());
  server.WaitUntilReady();
  HttpConnection connection(server.port());

  const std::vector<std::string> lines = {
      Record(41, 1),
      Record(42, "two"),
      json(Base64(PngOfWidth(43))).dump(),  // a bare base64 string, no id
      json{{"image", "###not base64"}, {"id", {{"k", json::array({4})}}}}.dump(),
      json{{"image", Base64("this is not an image")}, {"id", 5}}.dump(),
      "{\"image\": \"truncated JSON",
      Record(200, 7),  // 200 x 30 = 6000 pixels: fits; see the next one
      json{{"image", Base64(AsString(
                         Encode(CanvasWithRectangle(200, 100, 2, 2, 12, 10, 0, 255, 0), ".png")))},
           {"id", 8}}
          .dump(),  // 20000 pixels > --max-image-pixels 10000
      Record(49, nullptr),
      "",  // a blank line is a record too: the answer stays aligned
      Record(51, json::array({"s3://bucket/key", 10})),
  };
  std::string body;
  for (const std::string& line : lines) {
    body += line + "\n";  // the last '\n' starts no record
  }

  for (const char* newline : {"\n", "\r\n"}) {
    DYNAMIC_SECTION("lines ending in " << (newline[1] ? "CRLF" : "LF")) {
      std::string sent = body;
      if (newline[1]) {
        sent.clear();
        for (const std::string& line : lines) {
          sent += line + "\r\n";
        }
      }
      const HttpReply reply = connection.Send(
          "POST", "/invocations", sent,
          {{"Content-Type", "application/jsonlines"}, {"Accept", "application/jsonlines"}});
      const std::vector<json> answers = AnswerLines(reply);
      REQUIRE(answers.size() == lines.size());
      CHECK(std::stoi(reply.Header("x-mrcnn-batch-images")) >= 1);

      CheckDetected(answers[0], 41);
      CHECK(answers[0]["id"] == 1);
      CheckDetected(answers[1], 42);
      CHECK(answers[1]["id"] == "two");
      CheckDetected(answers[2], 43);
      CHECK_FALSE(answers[2].contains("id"));
      CheckErrorLine(answers[3], "bad_base64", "line 4");
      CHECK(answers[3]["id"] == json{{"k", json::array({4})}});
      CheckErrorLine(answers[4], "undecodable_image", "line 5");
      CHECK(answers[4]["id"] == 5);
      CheckErrorLine(answers[5], "bad_json_body", "line 6");
      CHECK_FALSE(answers[5].contains("id"));
      CHECK(answers[6]["width"] == 200);
      CHECK(answers[6]["id"] == 7);
      CheckErrorLine(answers[7], "image_too_large", "line 8");
      CHECK(answers[7]["id"] == 8);
      CheckDetected(answers[8], 49);
      CHECK(answers[8].contains("id"));
      CHECK(answers[8]["id"].is_null());
      CheckErrorLine(answers[9], "bad_json_body", "line 10 is blank");
      CheckDetected(answers[10], 51);
      CHECK(answers[10]["id"] == json::array({"s3://bucket/key", 10}));
    }
  }
  SECTION("without a final newline, and with the other media type names") {
    for (const char* type : {"application/jsonl", "application/x-jsonlines"}) {
      const HttpReply reply =
          connection.Send("POST", "/invocations", Record(60, "a") + "\n" + Record(61, "b"),
                          {{"Content-Type", type}});
      const std::vector<json> answers = AnswerLines(reply);
      REQUIRE(answers.size() == 2);
      CheckDetected(answers[0], 60);
      CheckDetected(answers[1], 61);
      CHECK(answers[1]["id"] == "b");
    }
  }
  SECTION("an empty body is answered with no lines") {
    CHECK(AnswerLines(connection.Send("POST", "/invocations", "", kJsonLines)).empty());
  }
  SECTION("options apply to every record and the attributes are echoed") {
    const HttpReply reply =
        connection.Send("POST", "/invocations", Record(70, 1) + "\n" + Record(71, 2) + "\n",
                        {{"Content-Type", "application/jsonlines"},
                         {"X-Amzn-SageMaker-Custom-Attributes", "masks=none,score_threshold=0.1"}});
    CHECK(reply.Header("x-amzn-sagemaker-custom-attributes") == "masks=none,score_threshold=0.1");
    for (const json& answer : AnswerLines(reply)) {
      REQUIRE(answer["detections"].size() == 1);
      CHECK_FALSE(answer["detections"][0].contains("mask"));
    }
  }
  SECTION("Accept must admit JSON Lines") {
    const HttpReply reply = connection.Send(
        "POST", "/invocations", Record(40, 1) + "\n",
        {{"Content-Type", "application/jsonlines"}, {"Accept", "application/json"}});
    CHECK(reply.status == 406);
    CHECK(json::parse(reply.body)["error"] == "not_acceptable");
  }
  CHECK(connection.Send("GET", "/ping").status == 200);  // the connection survived them all
}

TEST_CASE("many records keep their order while several are in flight and the queue is full",
          "[serving][http][batch]") {
  // A window of 2 x 1 worker x 4 images is wider than the queue: records the full queue
  // turns away wait for their own earlier records and are submitted again.
  ServerProcess server({"--queue-capacity", "2"}, json{{"batch_delay_ms", 5}});
  server.WaitUntilReady();
  auto send = [&](int first_width, int count) {
    std::string body;
    for (int i = 0; i < count; ++i) {
      body += Record(first_width + i, i) + "\n";
    }
    return Request(server.port(), "POST", "/invocations", body, kJsonLines);
  };
  auto first = std::async(std::launch::async, send, 30, 60);
  auto second = std::async(std::launch::async, send, 100, 40);
  for (auto [future, first_width, count] :
       {std::tuple{&first, 30, 60}, std::tuple{&second, 100, 40}}) {
    const std::vector<json> answers = AnswerLines(future->get());
    REQUIRE(answers.size() == static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      CheckDetected(answers[static_cast<size_t>(i)], first_width + i);
      CHECK(answers[static_cast<size_t>(i)]["id"] == i);
    }
  }
}

TEST_CASE("a record whose model call fails is an error line, time and shutdown fail the request",
          "[serving][http][batch]") {
  SECTION("the model throws on one record") {
    ServerProcess server({"--max-batch", "1"}, json{{"fail_on_width", 45}});
    server.WaitUntilReady();
    const HttpReply reply = Request(
        server.port(), "POST", "/invocations",
        Record(44, "a") + "\n" + Record(45, "b") + "\n" + Record(46, "c") + "\n", kJsonLines);
    const std::vector<json> answers = AnswerLines(reply);
    REQUIRE(answers.size() == 3);
    CheckDetected(answers[0], 44);
    CheckErrorLine(answers[1], "inference_failed", "line 2");
    CHECK(answers[1]["id"] == "b");
    CheckDetected(answers[2], 46);
  }
  SECTION("past the deadline the whole request is 503") {
    ServerProcess server({"--request-deadline-s", "0.5", "--max-batch", "1"},
                         json{{"image_delay_ms", 200}});
    server.WaitUntilReady(30s);
    std::string body;
    for (int i = 0; i < 10; ++i) {
      body += Record(40 + i, i) + "\n";
    }
    const auto start = std::chrono::steady_clock::now();
    const HttpReply reply = Request(server.port(), "POST", "/invocations", body, kJsonLines);
    CHECK(reply.status == 503);
    CHECK(json::parse(reply.body)["error"] == "deadline_exceeded");
    CHECK(std::chrono::steady_clock::now() - start < 1500ms);
  }
}

TEST_CASE("SAGEMAKER_BATCH in any case makes a batch transform server",
          "[serving][http][batch][config]") {
  auto parameters = [](const std::map<std::string, std::string>& env) {
    ServerProcess server({}, json::object(), env);
    server.WaitUntilReady();
    const HttpReply reply = Request(server.port(), "GET", "/execution-parameters");
    REQUIRE(reply.status == 200);
    return json::parse(reply.body);
  };
  for (const char* yes : {"true", "TRUE", "True"}) {
    INFO(yes);
    const json batch = parameters({{"SAGEMAKER_BATCH", yes},
                                   {"SAGEMAKER_MAX_PAYLOAD_IN_MB", "20"},
                                   {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "2"}});
    CHECK(batch == json{{"MaxConcurrentTransforms", 2},
                        {"BatchStrategy", "MULTI_RECORD"},
                        {"MaxPayloadInMB", 20}});
  }
  CHECK(parameters({{"SAGEMAKER_BATCH", "False"}})["BatchStrategy"] == "SINGLE_RECORD");
  // The job's own strategy, in the CreateTransformJob spelling, answered in AWS's.
  CHECK(parameters({{"SAGEMAKER_BATCH", "true"},
                    {"SAGEMAKER_BATCH_STRATEGY", "SingleRecord"}})["BatchStrategy"] ==
        "SINGLE_RECORD");
  CHECK(parameters({{"SAGEMAKER_BATCH_STRATEGY", "MultiRecord"}})["BatchStrategy"] ==
        "MULTI_RECORD");

  SECTION("a batch server answers JSON Lines") {
    ServerProcess server({}, json::object(), {{"SAGEMAKER_BATCH", "TrUe"}});
    server.WaitUntilReady();
    const std::vector<json> answers = AnswerLines(
        Request(server.port(), "POST", "/invocations", Record(33, "x") + "\n", kJsonLines));
    REQUIRE(answers.size() == 1);
    CheckDetected(answers[0], 33);
    CHECK(server.Log().find("batch transform (SAGEMAKER_BATCH, MULTI_RECORD)") !=
          std::string::npos);
  }
  SECTION("anything but true or false is a configuration error (exit 2)") {
    ServerProcess server(ServerProcess::Command{{MRCNN_SERVER_BINARY}, false},
                         {{"SAGEMAKER_BATCH", "yes"}});
    CHECK(server.WaitForExit(10s) == 2);
    CHECK(server.Log().find("SAGEMAKER_BATCH") != std::string::npos);
  }
}
