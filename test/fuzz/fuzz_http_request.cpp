// libFuzzer target over what the server does with untrusted bytes: HTTP/1.1 request parsing
// (Beast's parser with the server's limits), the header checks (Content-Type, Accept,
// X-Amzn-SageMaker-Custom-Attributes), body splitting (JSON + base64) and image decoding
// (header sniffing + the strict libjpeg/libpng codec), and JSON Lines records. The first input byte
// picks the entry point so that raw images are fuzzed directly too. Expected rejections are
// HttpError; anything else escaping, a crash, a leak or a sanitizer report is a finding.
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <span>

#include "serving/codec/image_decoding.h"
#include "serving/codec/json_lines_decoding.h"
#include "serving/codec/request_decoding.h"
#include "serving/http/http_error.h"

namespace {

namespace http = boost::beast::http;
using namespace mrcnn::serving;

// Small enough that a fuzz iteration stays fast, large enough for real images.
const ImageLimits kLimits{1 << 20, 4096};
constexpr size_t kPayloadLimit = 1 << 20;

void CheckImage(const RgbImage& image) {
  if (image.pixels.size() != static_cast<size_t>(image.height * image.width * 3)) {
    __builtin_trap();
  }
}

// Record by record, as the server does: a bad record is reported, never thrown.
void DecodeJsonLines(std::span<const uint8_t> body) {
  std::vector<uint8_t> copy(body.begin(), body.end());  // decoded in place
  for (std::span<uint8_t> line : SplitJsonLines(copy)) {
    const JsonLineRecord record = DecodeJsonLine(line, 1);
    if (record.error) {
      continue;
    }
    try {
      CheckImage(DecodeImage(record.image(), kLimits));
    } catch (const HttpError&) {
    }
  }
}

void DecodeImages(BodyKind kind, std::span<const uint8_t> body) {
  if (kind == BodyKind::kJsonLines) {
    DecodeJsonLines(body);
    return;
  }
  const EncodedImages encoded = SplitInvocationBody(kind, body, 4);
  for (const auto& bytes : encoded.images) {
    const RgbImage image = DecodeImage(bytes, kLimits);
    if (image.pixels.size() != static_cast<size_t>(image.height * image.width * 3)) {
      __builtin_trap();
    }
  }
}

void FuzzHttpRequest(std::span<const uint8_t> input) {
  http::request_parser<http::vector_body<uint8_t>> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(kPayloadLimit);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(input.data(), input.size()), ec);
  if (ec == http::error::need_more && !parser.is_header_done()) {
    return;
  }
  if (!parser.is_header_done() || (ec && ec != http::error::need_more)) {
    return;
  }
  const auto& request = parser.get();
  const auto field = [&](auto name) {
    const auto value = request[name];
    return std::string_view(value.data(), value.size());
  };
  try {
    ParseCustomAttributes(field("X-Amzn-SageMaker-Custom-Attributes"), PredictOptions{}, 1000);
    const BodyKind kind = ClassifyContentType(field(http::field::content_type));
    RequireJsonAcceptable(field(http::field::accept));
    if (parser.is_done()) {
      DecodeImages(kind, request.body());
    }
  } catch (const HttpError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::span<const uint8_t> rest(data + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        FuzzHttpRequest(rest);
        break;
      case 1:
        DecodeImages(BodyKind::kJson, rest);
        break;
      default:
        DecodeImages(BodyKind::kImage, rest);
        break;
    }
  } catch (const HttpError&) {
  }
  return 0;
}
