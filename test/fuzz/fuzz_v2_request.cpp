// libFuzzer target over the Open Inference Protocol's infer requests as the server reads them:
// the JSON header and the binary tensor extension (Inference-Header-Content-Length), what a
// detector takes from it (inputs, shapes, datatypes, base64, parameters, outputs), the images'
// decoding, and the answer's encoding for those images. The first input byte picks JSON alone
// (even) or a binary body whose JSON header is the next two bytes' length (odd, little-endian).
// Expected rejections are HttpError; anything else escaping, a crash, a leak or a sanitizer
// report is a finding, and so is a decoded image without height × width × 3 bytes or an
// answer whose header length runs past its body.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "serving/codec/image_decoding.h"
#include "serving/codec/v2_detector_request.h"
#include "serving/codec/v2_request_decoding.h"
#include "serving/codec/v2_response_encoding.h"
#include "serving/http/http_error.h"

namespace {

using namespace mrcnn::serving;

const ImageLimits kLimits{1 << 20, 4096};

// One detection covering each image, so that every output is encoded.
std::vector<ImageDetections> Detections(const std::vector<RgbImage>& images) {
  std::vector<ImageDetections> results;
  for (const RgbImage& image : images) {
    Detection detection{{0, 0, 1, 1}, 1, "a", 0.5f, {}, {}, {}, {{0, 0, 0}}};
    detection.mask.assign(static_cast<size_t>(image.height * image.width), 1);
    results.push_back({image.height, image.width, {detection}, true});
  }
  return results;
}

void FuzzInfer(std::span<const uint8_t> body, std::optional<size_t> header_length) {
  V2DetectorLimits limits;
  limits.image_limits = kLimits;
  limits.max_images = 4;
  V2DetectorRequest request = InterpretV2DetectorRequest(ParseV2InferRequest(body, header_length),
                                                         PredictorOutputs{true, 1, "fuzz"}, limits);
  std::vector<RgbImage> images = std::move(request.pixels);
  for (const auto& bytes : request.encoded) {
    images.push_back(DecodeImage(bytes, kLimits));
  }
  for (const RgbImage& image : images) {
    if (image.pixels.size() != static_cast<size_t>(image.height * image.width * 3)) {
      __builtin_trap();
    }
  }
  const V2ResponseSpec spec{"m", "1", request.id, request.outputs, request.mask_format, 1};
  const V2EncodedAnswer answer = EncodeV2InferResponse(Detections(images), spec);
  const size_t json_size = answer.header_length.value_or(answer.body.size());
  if (json_size > answer.body.size() ||
      nlohmann::json::parse(answer.body.substr(0, json_size), nullptr, false).is_discarded()) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) {
    return 0;
  }
  try {
    if (data[0] % 2 == 0) {
      FuzzInfer({data + 1, size - 1}, std::nullopt);
    } else {
      const size_t length = size_t{data[1]} | size_t{data[2]} << 8;
      FuzzInfer({data + 3, size - 3}, length);
    }
  } catch (const HttpError&) {
  }
  return 0;
}
