#include "serving/codec/image_decoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "serving/http/http_error.h"
#include "trainer/data/strict_image_codec.h"

namespace mrcnn::serving {
namespace {

uint32_t ReadBigEndian(const uint8_t* p, int bytes) {
  uint32_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value = (value << 8) | p[i];
  }
  return value;
}

std::optional<ImageHeader> ReadPngHeader(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  // signature, IHDR length, "IHDR", width, height
  if (bytes.size() < 24 || !std::equal(kSignature, kSignature + 8, bytes.begin()) ||
      ReadBigEndian(bytes.data() + 8, 4) != 13 ||
      !std::equal(bytes.begin() + 12, bytes.begin() + 16, "IHDR")) {
    return std::nullopt;
  }
  ImageHeader header{ImageFormat::kPng, ReadBigEndian(bytes.data() + 20, 4),
                     ReadBigEndian(bytes.data() + 16, 4)};
  return header;
}

bool IsStartOfFrame(uint8_t marker) {
  // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
  return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
}

std::optional<ImageHeader> ReadJpegHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) {
    return std::nullopt;
  }
  size_t pos = 2;
  while (pos < bytes.size()) {
    if (bytes[pos] != 0xFF) {
      return std::nullopt;  // garbage between segments
    }
    while (pos < bytes.size() && bytes[pos] == 0xFF) {
      ++pos;  // fill bytes
    }
    if (pos >= bytes.size()) {
      return std::nullopt;
    }
    const uint8_t marker = bytes[pos++];
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      continue;  // standalone markers carry no length
    }
    if (marker == 0xD9 || marker == 0xDA || marker == 0xD8) {
      return std::nullopt;  // end of image or scan data before any frame header
    }
    if (pos + 2 > bytes.size()) {
      return std::nullopt;
    }
    const uint32_t length = ReadBigEndian(bytes.data() + pos, 2);
    if (length < 2 || pos + length > bytes.size()) {
      return std::nullopt;
    }
    if (IsStartOfFrame(marker)) {
      if (length < 8) {
        return std::nullopt;
      }
      ImageHeader header{ImageFormat::kJpeg, ReadBigEndian(bytes.data() + pos + 3, 2),
                         ReadBigEndian(bytes.data() + pos + 5, 2)};
      return header;
    }
    pos += length;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ImageHeader> ReadImageHeader(std::span<const uint8_t> bytes) {
  if (auto png = ReadPngHeader(bytes)) {
    return png;
  }
  return ReadJpegHeader(bytes);
}

RgbImage DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) {
    throw HttpError(400, "empty_image", "the image is empty (0 bytes); send JPEG or PNG bytes");
  }
  const auto header = ReadImageHeader(bytes);
  if (!header) {
    throw HttpError(400, "undecodable_image",
                    fmt::format("the {} bytes are not a JPEG or PNG image (unknown signature or "
                                "malformed header); only JPEG and PNG are supported",
                                bytes.size()));
  }
  if (header->height <= 0 || header->width <= 0) {
    throw HttpError(400, "undecodable_image",
                    fmt::format("the image header declares an empty canvas ({}x{})", header->width,
                                header->height));
  }
  // Sides are checked before their product: a header may declare 2^32-1 per side, and the
  // product of two such sides overflows int64.
  if (header->height > limits.max_side || header->width > limits.max_side) {
    throw HttpError(400, "image_too_large",
                    fmt::format("the image is {}x{}; the limit is {} per side (server flag "
                                "--max-image-side)",
                                header->width, header->height, limits.max_side));
  }
  if (header->height * header->width > limits.max_pixels) {
    throw HttpError(400, "image_too_large",
                    fmt::format("the image is {}x{} ({} pixels); the limit is {} pixels "
                                "(MRCNN_MAX_IMAGE_PIXELS or --max-image-pixels)",
                                header->width, header->height, header->height * header->width,
                                limits.max_pixels));
  }
  // Decoded straight into the request's buffer: a large image costs its pixels once, not
  // twice (OpenCV's buffer, then ours).
  RgbImage image;
  image.height = header->height;
  image.width = header->width;
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  cv::Mat into(static_cast<int>(image.height), static_cast<int>(image.width), CV_8UC3,
               image.pixels.data());
  // JPEG: libjpeg with every warning fatal; PNG: chunk CRCs and completeness checked, then
  // libpng. Either way RGB out, and a truncated or corrupt upload is a 400, never a 200 on
  // made-up pixels.
  cv::Mat decoded;
  try {
    decoded = header->format == ImageFormat::kJpeg ? data::DecodeJpegRgb(bytes, into)
                                                   : data::DecodePngRgb(bytes, into);
  } catch (const data::ImageDataError& e) {
    throw HttpError(400, "undecodable_image", e.what());
  } catch (const cv::Exception& e) {
    throw HttpError(400, "undecodable_image",
                    fmt::format("the image could not be decoded: {}", e.what()));
  }
  if (decoded.empty() || decoded.type() != CV_8UC3) {
    throw HttpError(
        400, "undecodable_image",
        fmt::format("the {} image of {} bytes could not be decoded (corrupt data)",
                    header->format == ImageFormat::kPng ? "PNG" : "JPEG", bytes.size()));
  }
  if (decoded.rows != header->height || decoded.cols != header->width) {
    throw HttpError(400, "undecodable_image",
                    fmt::format("the decoded image is {}x{} but its header says {}x{}",
                                decoded.cols, decoded.rows, header->width, header->height));
  }
  if (decoded.data != image.pixels.data()) {
    decoded.copyTo(into);  // not expected: the decoders fill `into` when the size matches
  }
  return image;
}

}  // namespace mrcnn::serving
