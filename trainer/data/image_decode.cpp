#include "trainer/data/image_decode.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "trainer/data/strict_image_codec.h"
#include "trainer/data/whole_file.h"

namespace mrcnn::data {
namespace {

cv::Mat ToRgb8(cv::Mat m, const std::string& source) {
  if (m.empty()) {
    throw std::runtime_error(source + ": cannot decode the image (not a JPEG/PNG, or truncated)");
  }
  if (m.depth() == CV_16U) {
    m.convertTo(m, CV_8U, 1.0 / 257.0);
  } else if (m.depth() != CV_8U) {
    cv::normalize(m, m, 0, 255, cv::NORM_MINMAX, CV_8U);
  }
  cv::Mat rgb;
  switch (m.channels()) {
    case 1:
      cv::cvtColor(m, rgb, cv::COLOR_GRAY2RGB);
      break;
    case 3:
      cv::cvtColor(m, rgb, cv::COLOR_BGR2RGB);
      break;
    case 4:
      cv::cvtColor(m, rgb, cv::COLOR_BGRA2RGB);
      break;
    default:
      throw std::runtime_error(source + ": unsupported image with " + std::to_string(m.channels()) +
                               " channels");
  }
  return rgb;
}

}  // namespace

cv::Mat DecodeImageRgb(const std::filesystem::path& path) {
  std::string bytes;
  try {
    bytes = ReadWholeFile(path, "the image");
  } catch (const std::exception&) {
    throw std::runtime_error(path.string() + ": image file is missing or unreadable");
  }
  return DecodeImageRgb(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      path.string());
}

cv::Mat DecodeImageRgb(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.empty())
    throw std::runtime_error(source + ": image file is empty");
  // JPEG and PNG (what COCO data sets hold) go through the strict codec, so a truncated or
  // corrupt file is an error here, i.e. a skipped item in the data loader, rather than an
  // image with made-up pixels. Other formats are left to OpenCV as before.
  try {
    if (HasJpegSignature(bytes)) {
      return DecodeJpegRgb(bytes);
    }
    if (HasPngSignature(bytes)) {
      CheckPngChunks(bytes);
    }
  } catch (const ImageDataError& e) {
    throw std::runtime_error(source + ": " + e.what());
  }
  cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8U, const_cast<uint8_t*>(bytes.data()));
  return ToRgb8(cv::imdecode(buf, cv::IMREAD_UNCHANGED), source);
}

}  // namespace mrcnn::data
