// libFuzzer target over image decoding as the server and the training data loader do it:
// serving's header check and size limits (serving/image_decoding.h), then the strict JPEG
// and PNG decoders (trainer/data/strict_image_codec.h) that both use. HttpError and
// ImageDataError are the expected rejections; any other exception, a crash, a sanitizer
// report, or disagreement is a finding: an image the server accepts must have the size its
// header declares and decode to the same pixels through the codec directly.
#include <cstdlib>
#include <cstring>
#include <opencv2/core.hpp>
#include <span>

#include "serving/codec/image_decoding.h"
#include "serving/http/http_error.h"
#include "trainer/data/strict_image_codec.h"

namespace {

using namespace mrcnn;

// Small enough that an iteration stays fast; what the codec may allocate is bounded by it.
const serving::ImageLimits kLimits{1 << 20, 4096};

void CheckSameAsCodec(std::span<const uint8_t> bytes, const serving::RgbImage& image) {
  const cv::Mat direct =
      data::HasJpegSignature(bytes) ? data::DecodeJpegRgb(bytes) : data::DecodePngRgb(bytes);
  const auto header = serving::ReadImageHeader(bytes);
  if (!header || header->height != image.height || header->width != image.width ||
      direct.rows != image.height || direct.cols != image.width || !direct.isContinuous() ||
      std::memcmp(direct.data, image.pixels.data(), image.pixels.size()) != 0) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  serving::RgbImage image;
  try {
    image = serving::DecodeImage(bytes, kLimits);
  } catch (const serving::HttpError&) {
    // Refused by the server; the PNG chunk walk alone must still refuse or pass cleanly.
    if (data::HasPngSignature(bytes)) {
      try {
        data::CheckPngChunks(bytes);
      } catch (const data::ImageDataError&) {
      }
    }
    return 0;
  }
  CheckSameAsCodec(bytes, image);
  return 0;
}
