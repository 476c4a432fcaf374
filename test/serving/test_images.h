#pragma once
// Test images with known content, encoded with OpenCV, for the serving tests.
#include <cstdint>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

namespace mrcnn::serving::testing {

// A black RGB canvas with one filled rectangle [x0, x1) x [y0, y1) of colour (r, g, b).
inline cv::Mat CanvasWithRectangle(int width, int height, int x0, int y0, int x1, int y1, uint8_t r,
                                   uint8_t g, uint8_t b) {
  cv::Mat bgr(height, width, CV_8UC3, cv::Scalar(0, 0, 0));
  bgr(cv::Rect(x0, y0, x1 - x0, y1 - y0)).setTo(cv::Scalar(b, g, r));
  return bgr;
}

inline std::vector<uint8_t> Encode(const cv::Mat& image, const std::string& extension) {
  std::vector<uint8_t> bytes;
  std::vector<int> params;
  if (extension == ".jpg") {
    params = {cv::IMWRITE_JPEG_QUALITY, 100};
  }
  if (!cv::imencode(extension, image, bytes, params)) {
    throw std::runtime_error("cv::imencode failed for " + extension);
  }
  return bytes;
}

// One copy of the bytes (the iterator-pair constructor copies byte by byte, which a
// sanitizer build's -O0 makes seconds for a 100 MB image).
inline std::string AsString(const std::vector<uint8_t>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace mrcnn::serving::testing
