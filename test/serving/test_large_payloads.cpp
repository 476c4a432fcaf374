// Integration tests: large bodies (SageMaker async inference: payloads up to 1 GB) against a
// real server process on loopback. The payload limit from SAGEMAKER_MAX_PAYLOAD_IN_MB, the
// decoded-pixel limit as a setting (an 8000x6000 aerial image fits by default, the 60000 x
// 60000 PNG bomb does not), and the server's peak memory for a 100 MB+ body: the body and its
// decoded pixels, each once.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serving/codec/base64.h"
#include "test/serving/server_process.h"
#include "test/serving/test_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::map<std::string, std::string> kPngNoMasks = {
    {"Content-Type", "image/png"}, {"X-Amzn-SageMaker-Custom-Attributes", "masks=none"}};

// Uniform noise, stored without compression: the PNG is as large as its pixels (3 bytes
// each), and no codec could make it much smaller.
std::string NoisePng(int width, int height) {
  cv::Mat noise(height, width, CV_8UC3);
  cv::RNG(7).fill(noise, cv::RNG::UNIFORM, 0, 256);
  std::vector<uint8_t> bytes;
  REQUIRE(cv::imencode(".png", noise, bytes, {cv::IMWRITE_PNG_COMPRESSION, 0}));
  return AsString(bytes);
}

void AppendBigEndian(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out += static_cast<char>((value >> shift) & 0xFF);
  }
}

void AppendChunk(std::string& out, const std::string& type, const std::string& data) {
  AppendBigEndian(out, static_cast<uint32_t>(data.size()));
  const std::string typed = type + data;
  out += typed;
  AppendBigEndian(out, static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                                   reinterpret_cast<const Bytef*>(typed.data()),
                                                   static_cast<uInt>(typed.size()))));
}

// A real, valid decompression bomb: a 1-bit grey PNG of side x side black pixels, a few
// hundred KB that would decode to side * side * 3 bytes of RGB (10.8 GB at 60000).
std::string PngBomb(uint32_t side) {
  std::string ihdr;
  AppendBigEndian(ihdr, side);
  AppendBigEndian(ihdr, side);
  ihdr += std::string{1, 0, 0, 0, 0};  // bit depth 1, grey, deflate, no filter, no interlace
  z_stream stream{};
  REQUIRE(deflateInit(&stream, Z_BEST_COMPRESSION) == Z_OK);
  std::string row((side + 7) / 8 + 1, '\0');  // filter byte 0, then the packed pixels
  std::string compressed;
  std::vector<Bytef> out(1 << 16);
  for (uint32_t y = 0; y < side; ++y) {
    stream.next_in = reinterpret_cast<Bytef*>(row.data());
    stream.avail_in = static_cast<uInt>(row.size());
    const int flush = y + 1 == side ? Z_FINISH : Z_NO_FLUSH;
    do {
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(out.size());
      deflate(&stream, flush);
      compressed.append(reinterpret_cast<const char*>(out.data()), out.size() - stream.avail_out);
    } while (stream.avail_out == 0);
  }
  deflateEnd(&stream);
  std::string png = "\x89PNG\r\n\x1a\n";
  AppendChunk(png, "IHDR", ihdr);
  AppendChunk(png, "IDAT", compressed);
  AppendChunk(png, "IEND", "");
  return png;
}

// kB -> bytes of a /proc/<pid>/status field (VmRSS: now, VmHWM: the peak so far).
size_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoull(line.substr(field.size() + 1)) * 1024;
    }
  }
  FAIL("no " << field << " in /proc/" << pid << "/status");
  return 0;
}

std::string Error(const HttpReply& reply) {
  return json::parse(reply.body).value("error", "");
}

double Mb(size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

TEST_CASE("a 4000x3000 noise PNG: 200 under SAGEMAKER_MAX_PAYLOAD_IN_MB=100, 413 at the default",
          "[serving][http][large]") {
  const std::string png = NoisePng(4000, 3000);
  REQUIRE(png.size() > (6u << 20));  // incompressible: over the default 6 MB limit
  {
    ServerProcess server({}, json::object(), {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "100"}});
    server.WaitUntilReady();
    HttpConnection connection(server.port());
    const HttpReply reply = connection.Send("POST", "/invocations", png, kPngNoMasks, 120s);
    INFO(reply.body.substr(0, 500));
    REQUIRE(reply.status == 200);
    const json body = json::parse(reply.body);
    CHECK(body["width"] == 4000);
    CHECK(body["height"] == 3000);
  }
  ServerProcess server({}, json::object());
  server.WaitUntilReady();
  RawConnection raw(server.port());
  raw.Write("POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: " +
            std::to_string(png.size()) + "\r\n\r\n");
  raw.TryWrite(png.substr(0, 1 << 20));
  const HttpReply reply = raw.ReadResponse(10s);
  CHECK(reply.status == 413);
  CHECK(Error(reply) == "payload_too_large");
  CHECK_THAT(json::parse(reply.body)["detail"].get<std::string>(),
             Catch::Contains(std::to_string(png.size())) &&
                 Catch::Contains("SAGEMAKER_MAX_PAYLOAD_IN_MB"));
}

TEST_CASE("the decoded-pixel limit admits aerial images and refuses the PNG bomb unread",
          "[serving][http][large]") {
  SECTION("an 8000x6000 image at the default limit; MRCNN_MAX_IMAGE_PIXELS and the flag") {
    const std::string aerial =
        AsString(Encode(CanvasWithRectangle(8000, 6000, 100, 200, 2100, 1200, 0, 255, 0), ".png"));
    {
      ServerProcess server({}, json::object());
      server.WaitUntilReady();
      const HttpReply reply = Request(server.port(), "POST", "/invocations", aerial, kPngNoMasks);
      INFO(reply.body.substr(0, 500));
      REQUIRE(reply.status == 200);
      const json body = json::parse(reply.body);
      CHECK(body["width"] == 8000);
      REQUIRE(body["detections"].size() == 1);
      CHECK(body["detections"][0]["box"] == json::array({100.0, 200.0, 2100.0, 1200.0}));
    }
    {
      ServerProcess server({}, json::object(), {{"MRCNN_MAX_IMAGE_PIXELS", "40000000"}});
      server.WaitUntilReady();
      const HttpReply reply = Request(server.port(), "POST", "/invocations", aerial, kPngNoMasks);
      CHECK(reply.status == 400);
      CHECK(Error(reply) == "image_too_large");
      CHECK_THAT(json::parse(reply.body)["detail"].get<std::string>(),
                 Catch::Contains("MRCNN_MAX_IMAGE_PIXELS"));
    }
    ServerProcess flagged({"--max-image-pixels", "48000000"}, json::object(),
                          {{"MRCNN_MAX_IMAGE_PIXELS", "40000000"}});
    flagged.WaitUntilReady();
    CHECK(Request(flagged.port(), "POST", "/invocations", aerial, kPngNoMasks).status == 200);
  }
  SECTION("the 60000x60000 PNG bomb: 400 image_too_large, nothing allocated") {
    const std::string bomb = PngBomb(60000);
    REQUIRE(bomb.size() < (6u << 20));  // it passes the payload limit
    ServerProcess server({}, json::object());
    server.WaitUntilReady();
    const size_t peak_before = ProcStatusBytes(server.pid(), "VmHWM");
    for (const char* type : {"image/png", "application/jsonlines"}) {
      INFO(type);
      const bool lines = std::string(type) == "application/jsonlines";
      const std::string body =
          lines ? json{{"image",
                        EncodeBase64(reinterpret_cast<const uint8_t*>(bomb.data()), bomb.size())}}
                      .dump()
                : bomb;
      const HttpReply reply =
          Request(server.port(), "POST", "/invocations", body, {{"Content-Type", type}});
      INFO(reply.body.substr(0, 500));
      if (lines) {
        REQUIRE(reply.status == 200);
        CHECK(json::parse(reply.body.substr(0, reply.body.find('\n')))["error"] ==
              "image_too_large");
      } else {
        CHECK(reply.status == 400);
        CHECK(Error(reply) == "image_too_large");
      }
    }
    // Refused from its header: the server's peak grew by about the request, not 10.8 GB.
    CHECK(ProcStatusBytes(server.pid(), "VmHWM") - peak_before < (64u << 20));
  }
}

// AddressSanitizer and ThreadSanitizer builds (scripts/test-sanitizers.sh): their shadow
// memory and ASan's quarantine of freed blocks are in the server's RSS.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

TEST_CASE("a 100 MB+ body costs the server about twice its size at the peak",
          "[serving][http][large][memory]") {
  // 6000 x 6000 noise: 108 MB stored, 108 MB of decoded pixels. Catch2 runs this body once
  // per section, so the image and the JSON document (the same for both JSON types) are made
  // once: in the sanitizer builds (-O0) each remake took tens of seconds.
  static const std::string png = NoisePng(6000, 6000);
  REQUIRE(png.size() > (100u << 20));
  // What json{{"image", base64}, {"id", "big"}}.dump() writes (base64 needs no escaping),
  // without nlohmann's per-character serializer.
  static const std::string document =
      R"({"id":"big","image":")" +
      EncodeBase64(reinterpret_cast<const uint8_t*>(png.data()), png.size()) + R"("})";
  for (const char* type : {"image/png", "application/json", "application/jsonlines"}) {
    DYNAMIC_SECTION(type) {
      const bool lines = std::string(type) == "application/jsonlines";
      const bool raw = std::string(type) == "image/png";
      const std::string& body = raw ? png : document;
      ServerProcess server({}, json::object(), {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "200"}});
      server.WaitUntilReady();
      const size_t before = ProcStatusBytes(server.pid(), "VmRSS");
      const HttpReply reply =
          Request(server.port(), "POST", "/invocations", body,
                  {{"Content-Type", type}, {"X-Amzn-SageMaker-Custom-Attributes", "masks=none"}});
      INFO(reply.body.substr(0, 500));
      REQUIRE(reply.status == 200);
      const json answer =
          json::parse(lines ? reply.body.substr(0, reply.body.find('\n')) : reply.body);
      CHECK(answer["width"] == 6000);
      const size_t peak = ProcStatusBytes(server.pid(), "VmHWM");
      const double extra = static_cast<double>(peak - before) / static_cast<double>(body.size());
      std::printf(
          "[peak-rss] %s body %.1f MiB (a %.1f MiB PNG): RSS before %.1f MiB, peak %.1f MiB, "
          "peak - before = %.1f MiB = %.2f x the body\n",
          type, Mb(body.size()), Mb(png.size()), Mb(before), Mb(peak), Mb(peak - before), extra);
      std::fflush(stdout);
      // The body once and the decoded pixels (here about as large) once; a second copy of
      // either would be 3x (PNG) or 2.5x (base64 bodies, whose text is 4/3 of the bytes).
      // In the sanitizer builds the server's RSS also holds their shadow memory (and ASan's
      // quarantine of freed blocks), so the ratio says nothing about the server there: those
      // builds check the answer, scripts/test.sh's build the memory.
      if (!kSanitizerBuild) {
        CHECK(extra < 2.3);
      }
    }
  }
}
