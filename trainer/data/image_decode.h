#pragma once
// Image files to 8-bit 3-channel RGB: JPEG with libjpeg and PNG with libpng
// (strict_image_codec.h, the pixels OpenCV's imdecode gave); grayscale is replicated,
// alpha is dropped (COCO annotations ignore it), 16-bit keeps its high byte. JPEG and PNG
// are the formats COCO-style data sets and the serving API use; any other file is an error
// that says so. The raw pixel orientation is kept (EXIF rotation is not applied) because
// COCO annotations are in stored-pixel coordinates.
#include <cstdint>
#include <filesystem>
#include <opencv2/core.hpp>
#include <span>
#include <string>

namespace mrcnn::data {

// Throws std::runtime_error naming the file when it is missing or cannot be decoded, and
// when it is not a JPEG or PNG, or when it is truncated or corrupt (strict_image_codec.h): damaged
// data is never decoded with made-up pixels.
cv::Mat DecodeImageRgb(const std::filesystem::path& path);
// `source` names the bytes in the error message.
cv::Mat DecodeImageRgb(std::span<const uint8_t> bytes, const std::string& source);

}  // namespace mrcnn::data
