#pragma once
// Request bytes -> 8-bit RGB pixels. Only JPEG and PNG are accepted (identified by their
// signature, whatever the Content-Type said): every other OpenCV codec is attack surface
// the service does not need. The dimensions are read from the file header BEFORE decoding,
// so a small file that claims a huge canvas (a decompression bomb) is refused without
// allocating it.
#include <cstdint>
#include <optional>
#include <span>

#include "serving/models/predictor.h"

namespace mrcnn::serving {

enum class ImageFormat { kJpeg, kPng };

struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int64_t height = 0;
  int64_t width = 0;
};

// Reads the format and canvas size from a JPEG (first SOFn marker) or PNG (IHDR) header.
// nullopt when the bytes are neither or the header is truncated or malformed.
std::optional<ImageHeader> ReadImageHeader(std::span<const uint8_t> bytes);

struct ImageLimits {
  // height * width: 8000x6000 aerial images (48 MP) and 60 MP cameras fit; each costs
  // height * width * 3 bytes decoded.
  int64_t max_pixels = 64'000'000;
  int64_t max_side = 16'384;  // either dimension
};

// Decodes to RGB. Grayscale is replicated to three channels, alpha is dropped, 16-bit
// samples are scaled to 8 bits, EXIF orientation is ignored (pixels as stored, like
// torchvision.io and PIL). Throws HttpError(400) saying why on an empty, unknown,
// truncated, corrupt or too large image: a JPEG that makes libjpeg warn, or a PNG with a
// missing chunk or a CRC mismatch, is refused rather than decoded with made-up pixels
// (trainer/data/strict_image_codec.h).
RgbImage DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits);

}  // namespace mrcnn::serving
