#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <tuple>

#include "serving/codec/base64.h"
#include "serving/codec/image_decoding.h"
#include "serving/codec/request_decoding.h"
#include "serving/http/http_error.h"
#include "test/serving/test_images.h"
#include "test/trainer/data/damaged_images.h"

using namespace mrcnn::serving;
using namespace mrcnn::serving::testing;

namespace {

unsigned StatusOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const HttpError& e) {
    return e.status();
  }
  return 0;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("base64 round-trips and rejects corruption", "[serving][base64]") {
  for (size_t n = 0; n < 40; ++n) {
    std::vector<uint8_t> data(n);
    for (size_t i = 0; i < n; ++i) {
      data[i] = static_cast<uint8_t>(i * 37 + 11);
    }
    const std::string text = EncodeBase64(data.data(), data.size());
    REQUIRE(text.size() == (n + 2) / 3 * 4);
    auto decoded = DecodeBase64(text);
    REQUIRE(decoded);
    CHECK(*decoded == data);
    // Unpadded and line-wrapped forms decode to the same bytes.
    std::string unpadded = text.substr(0, text.find('='));
    CHECK(DecodeBase64(unpadded) == decoded);
    CHECK(DecodeBase64(text.substr(0, text.size() / 2) + "\r\n" + text.substr(text.size() / 2)) ==
          decoded);
  }
  CHECK(DecodeBase64("aGVsbG8=") == std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'});
  // RFC 4648's test vectors: the encoder's text, padding included.
  const std::vector<std::pair<std::string, std::string>> rfc4648 = {{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : rfc4648) {
    CHECK(EncodeBase64(reinterpret_cast<const uint8_t*>(plain.data()), plain.size()) == encoded);
  }
  CHECK_FALSE(DecodeBase64("aGVsbG8*"));    // not in the alphabet
  CHECK_FALSE(DecodeBase64("a"));           // 6 bits cannot make a byte
  CHECK_FALSE(DecodeBase64("aGVsbG9="));    // non-zero padding bits
  CHECK_FALSE(DecodeBase64("aGVs=bG8"));    // data after padding
  CHECK_FALSE(DecodeBase64("aGVsbG8==="));  // too much padding
}

TEST_CASE("image headers give format and size before decoding", "[serving][image]") {
  const cv::Mat image = CanvasWithRectangle(37, 23, 1, 1, 5, 5, 255, 255, 255);
  const auto png = ReadImageHeader(Encode(image, ".png"));
  REQUIRE(png);
  CHECK(png->format == ImageFormat::kPng);
  CHECK(png->width == 37);
  CHECK(png->height == 23);
  const auto jpeg = ReadImageHeader(Encode(image, ".jpg"));
  REQUIRE(jpeg);
  CHECK(jpeg->format == ImageFormat::kJpeg);
  CHECK(jpeg->width == 37);
  CHECK(jpeg->height == 23);
  CHECK_FALSE(ReadImageHeader(Encode(image, ".bmp")));
  std::vector<uint8_t> truncated = Encode(image, ".png");
  truncated.resize(20);
  CHECK_FALSE(ReadImageHeader(truncated));
}

TEST_CASE("images decode to RGB whatever their channels", "[serving][image]") {
  const cv::Mat red = CanvasWithRectangle(16, 8, 0, 0, 16, 8, 200, 10, 30);
  const RgbImage from_png = DecodeImage(Encode(red, ".png"), {});
  REQUIRE(from_png.height == 8);
  REQUIRE(from_png.width == 16);
  CHECK(from_png.pixels[0] == 200);  // R first: OpenCV's BGR was converted
  CHECK(from_png.pixels[1] == 10);
  CHECK(from_png.pixels[2] == 30);

  cv::Mat gray(5, 7, CV_8UC1, cv::Scalar(77));
  const RgbImage from_gray = DecodeImage(Encode(gray, ".png"), {});
  CHECK(from_gray.pixels == std::vector<uint8_t>(5 * 7 * 3, 77));

  cv::Mat rgba(4, 4, CV_8UC4, cv::Scalar(1, 2, 3, 0));
  const RgbImage from_rgba = DecodeImage(Encode(rgba, ".png"), {});
  CHECK(from_rgba.pixels[0] == 3);  // alpha dropped, colour kept
  CHECK(from_rgba.pixels[2] == 1);

  cv::Mat deep(3, 3, CV_16UC3, cv::Scalar(65535, 0, 0));
  const RgbImage from_16bit = DecodeImage(Encode(deep, ".png"), {});
  CHECK(from_16bit.pixels[2] == 255);  // 16-bit blue scaled to 8 bits
  CHECK(from_16bit.pixels[0] == 0);
}

TEST_CASE("bad images are 400s", "[serving][image]") {
  const cv::Mat image = CanvasWithRectangle(64, 48, 1, 1, 5, 5, 255, 255, 255);
  CHECK(StatusOf([] { DecodeImage({}, {}); }) == 400);
  CHECK(StatusOf([] { DecodeImage(Bytes("GIF89a not an image"), {}); }) == 400);
  auto png = Encode(image, ".png");
  png.resize(png.size() / 2);  // header intact, data truncated
  CHECK(StatusOf([&] { DecodeImage(png, {}); }) == 400);
  // Limits are checked from the header, before anything is decoded.
  CHECK(StatusOf([&] {
          DecodeImage(Encode(image, ".png"), ImageLimits{64 * 48 - 1, 100});
        }) == 400);
  CHECK(StatusOf([&] { DecodeImage(Encode(image, ".jpg"), ImageLimits{1 << 20, 63}); }) == 400);
  CHECK_NOTHROW(DecodeImage(Encode(image, ".jpg"), ImageLimits{64 * 48, 64}));
  // A PNG header that claims 100000 x 100000 pixels.
  auto bomb = Encode(image, ".png");
  bomb[16] = 0x00, bomb[17] = 0x01, bomb[18] = 0x86, bomb[19] = 0xA0;
  bomb[20] = 0x00, bomb[21] = 0x01, bomb[22] = 0x86, bomb[23] = 0xA0;
  try {
    DecodeImage(bomb, {});
    FAIL("a decompression bomb was decoded");
  } catch (const HttpError& e) {
    CHECK(e.status() == 400);
    CHECK(e.code() == "image_too_large");
  }
  // 2^32-1 per side: the message must not multiply the sides (int64 overflow, found by the
  // fuzzer; seeds/regression_png_4294967295_sides).
  for (int i = 16; i < 24; ++i) {
    bomb[i] = 0xFF;
  }
  try {
    DecodeImage(bomb, {});
    FAIL("a 4294967295x4294967295 header was decoded");
  } catch (const HttpError& e) {
    CHECK(e.code() == "image_too_large");
    CHECK_THAT(e.what(), Catch::Contains("4294967295x4294967295"));
  }
}

TEST_CASE("truncated or corrupt images are 400s, intact ones decode as before",
          "[serving][image][bad-data]") {
  using namespace mrcnn::testing;
  const cv::Mat noisy = NoisyBgr(128, 96, 4);
  const auto jpeg = Encode(noisy, ".jpg");
  const auto png = Encode(noisy, ".png");
  for (const auto& intact : {jpeg, png, WithTextChunk(png)}) {
    const RgbImage image = DecodeImage(intact, {});
    cv::Mat expected;  // what OpenCV's imdecode alone gave
    cv::cvtColor(cv::imdecode(intact, cv::IMREAD_COLOR), expected, cv::COLOR_BGR2RGB);
    REQUIRE(image.height == 96);
    REQUIRE(image.width == 128);
    CHECK(std::equal(image.pixels.begin(), image.pixels.end(), expected.data));
  }
  const std::vector<std::tuple<std::string, std::vector<uint8_t>, std::string>> damaged = {
      {"the first 700 bytes of a JPEG", FirstBytes(jpeg, 700),
       "the JPEG data is truncated or corrupt: Premature end of JPEG file"},
      {"a JPEG with noise over its middle", NoiseOverMiddle(jpeg),
       "the JPEG data is truncated or corrupt: Corrupt JPEG data: "},
      {"a PNG with one IDAT CRC byte flipped", FlipPngCrcByte(png, "IDAT"),
       "the PNG data is corrupt: CRC mismatch in the IDAT chunk at byte "},
      {"a PNG with one tEXt CRC byte flipped", FlipPngCrcByte(WithTextChunk(png), "tEXt"),
       "the PNG data is corrupt: CRC mismatch in the tEXt chunk at byte 33"},
      {"the first half of a PNG", FirstBytes(png, png.size() / 2),
       "the PNG data is truncated: the IDAT chunk at byte "},
      {"a PNG without IEND", FirstBytes(png, png.size() - 12),
       "the PNG data is truncated: its " + std::to_string(png.size() - 12) +
           " bytes end before the IEND chunk"},
  };
  for (const auto& [name, bytes, detail] : damaged) {
    DYNAMIC_SECTION(name) {
      try {
        DecodeImage(bytes, {});
        FAIL("decoded");
      } catch (const HttpError& e) {
        CHECK(e.status() == 400);
        CHECK(e.code() == "undecodable_image");
        CHECK_THAT(e.what(), Catch::StartsWith(detail));
      }
    }
  }
}

TEST_CASE("content types, Accept and custom attributes", "[serving][request]") {
  CHECK(ClassifyContentType("image/jpeg") == BodyKind::kImage);
  CHECK(ClassifyContentType("IMAGE/PNG") == BodyKind::kImage);
  CHECK(ClassifyContentType("application/x-image") == BodyKind::kImage);
  CHECK(ClassifyContentType("application/json; charset=utf-8") == BodyKind::kJson);
  CHECK(StatusOf([] { ClassifyContentType("text/csv"); }) == 415);
  CHECK(StatusOf([] { ClassifyContentType(""); }) == 415);

  CHECK_NOTHROW(RequireJsonAcceptable(""));
  CHECK_NOTHROW(RequireJsonAcceptable("*/*"));
  CHECK_NOTHROW(RequireJsonAcceptable("text/html, application/json;q=0.5"));
  CHECK_NOTHROW(RequireJsonAcceptable("application/*"));
  CHECK(StatusOf([] { RequireJsonAcceptable("text/csv"); }) == 406);
  CHECK(StatusOf([] { RequireJsonAcceptable("application/json;q=0"); }) == 406);

  const PredictOptions defaults;
  const PredictOptions parsed = ParseCustomAttributes(
      "score_threshold=0.5, max_detections=50,masks=none,trace_id=abc", defaults, 1000);
  CHECK(parsed.score_threshold == 0.5f);
  CHECK(parsed.max_detections == 50);
  CHECK(parsed.tiled_max_detections == 50);   // a request's cap holds for its tiled result too
  CHECK(defaults.tiled_max_detections == 0);  // unset: a tiled result's cap grows with its tiles
  CHECK(ParseCustomAttributes("score_threshold=0.5", defaults, 1000).tiled_max_detections == 0);
  CHECK_FALSE(parsed.masks);
  CHECK(ParseCustomAttributes("", defaults, 1000) == defaults);
  CHECK(ParseCustomAttributes("masks=rle", defaults, 1000).masks);
  CHECK(StatusOf([&] { ParseCustomAttributes("score_threshold=1.5", defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes("score_threshold=abc", defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes("max_detections=0", defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes("max_detections=1001", defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes("masks=png", defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes(std::string(1025, 'a'), defaults, 1000); }) == 400);
  CHECK(StatusOf([&] { ParseCustomAttributes("masks=rle\x01", defaults, 1000); }) == 400);
}

TEST_CASE("custom attributes choose tiled inference, invalid tile values are a 400 naming the key",
          "[serving][request]") {
  const PredictOptions defaults;
  CHECK(defaults.tile_size == 0);  // off unless asked for
  const PredictOptions tiled = ParseCustomAttributes(
      "tile_size=800, tile_overlap=0.25,tile_full_image=TRUE", defaults, 1000);
  CHECK(tiled.tile_size == 800);
  CHECK(tiled.tile_overlap == 0.25f);
  CHECK(tiled.tile_full_image);
  CHECK(ParseCustomAttributes("tile_size=0", tiled, 1000).tile_size == 0);
  CHECK(ParseCustomAttributes("tile_size=16384", defaults, 1000).tile_size == 16384);
  CHECK(ParseCustomAttributes("tile_overlap=0", tiled, 1000).tile_overlap == 0.0f);
  for (const char* bad :
       {"tile_size=-1", "tile_size=16385", "tile_size=8.5", "tile_size=", "tile_overlap=0.91",
        "tile_overlap=-0.1", "tile_overlap=half", "tile_full_image=1"}) {
    CAPTURE(bad);
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    try {
      ParseCustomAttributes(bad, defaults, 1000);
      FAIL("accepted");
    } catch (const HttpError& e) {
      CHECK(e.status() == 400);
      CHECK(e.code() == "bad_custom_attributes");
      CHECK_THAT(e.detail(), Catch::Contains(key));
    }
  }
}

TEST_CASE("JSON bodies split into images", "[serving][request]") {
  const auto png = Encode(CanvasWithRectangle(8, 8, 0, 0, 4, 4, 255, 0, 0), ".png");
  const std::string b64 = EncodeBase64(png.data(), png.size());

  const std::string single = nlohmann::json{{"image", b64}}.dump();
  EncodedImages one = SplitInvocationBody(BodyKind::kJson, Bytes(single), 8);
  REQUIRE(one.images.size() == 1);
  CHECK_FALSE(one.list_form);
  CHECK(std::vector<uint8_t>(one.images[0].begin(), one.images[0].end()) == png);

  const std::string instances =
      nlohmann::json{{"instances", {{{"image", b64}}, {{"image", b64}}}}}.dump();
  EncodedImages two = SplitInvocationBody(BodyKind::kJson, Bytes(instances), 8);
  CHECK(two.images.size() == 2);
  CHECK(two.list_form);

  const std::string bare = nlohmann::json::array({{{"image", b64}}, b64, {{"image", b64}}}).dump();
  EncodedImages three = SplitInvocationBody(BodyKind::kJson, Bytes(bare), 8);
  CHECK(three.images.size() == 3);
  CHECK(three.list_form);
  CHECK(std::vector<uint8_t>(three.images[1].begin(), three.images[1].end()) == png);

  EncodedImages raw = SplitInvocationBody(BodyKind::kImage, png, 8);
  REQUIRE(raw.images.size() == 1);
  CHECK(raw.images[0].data() == png.data());  // no copy of a raw image body

  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes("{not json"), 8); }) == 400);
  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes("{\"img\": 1}"), 8); }) == 400);
  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes("[]"), 8); }) == 400);
  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes("{\"image\": 7}"), 8); }) == 400);
  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes("{\"image\": \"@@@\"}"), 8); }) ==
        400);
  CHECK(StatusOf([&] { SplitInvocationBody(BodyKind::kJson, Bytes(bare), 2); }) == 400);
}

TEST_CASE("JSON bodies split in place: base64 decoded inside the body, escapes understood",
          "[serving][request]") {
  const auto png = Encode(CanvasWithRectangle(8, 8, 0, 0, 4, 4, 255, 0, 0), ".png");
  const std::string b64 = EncodeBase64(png.data(), png.size());
  std::string escaped = b64;  // "\/" is how some JSON encoders write '/'
  for (size_t at = escaped.find('/'); at != std::string::npos; at = escaped.find('/', at + 2)) {
    escaped.replace(at, 1, "\\/");
  }
  REQUIRE(escaped != b64);  // this image's base64 has a '/' to escape
  std::string body = "{\"instances\": [{\"image\": \"" + b64 + "\"}, \"" + escaped +
                     "\", {\"other\": 1, \"image\": \"" + b64 + "\"}]}";
  const std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(body.data()), body.size());
  const EncodedImages split = SplitInvocationBodyInPlace(BodyKind::kJson, bytes, 8);
  REQUIRE(split.images.size() == 3);
  CHECK(split.list_form);
  for (const auto& image : split.images) {
    CHECK(std::vector<uint8_t>(image.begin(), image.end()) == png);
  }
  // An escaped string is decoded into a vector of its own, the others where they lie.
  CHECK(split.owned.size() == 1);
  CHECK(split.images[0].data() >= bytes.data());
  CHECK(split.images[0].data() < bytes.data() + bytes.size());

  std::string single = nlohmann::json{{"image", b64}, {"id", 3}}.dump();
  const EncodedImages one = SplitInvocationBodyInPlace(
      BodyKind::kJson, {reinterpret_cast<uint8_t*>(single.data()), single.size()}, 8);
  REQUIRE(one.images.size() == 1);
  CHECK_FALSE(one.list_form);
  CHECK(std::vector<uint8_t>(one.images[0].begin(), one.images[0].end()) == png);

  std::string not_list = "{\"instances\": {\"image\": \"" + b64 + "\"}}";
  CHECK(StatusOf([&] {
          SplitInvocationBodyInPlace(
              BodyKind::kJson, {reinterpret_cast<uint8_t*>(not_list.data()), not_list.size()}, 8);
        }) == 400);
}
