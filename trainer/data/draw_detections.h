#pragma once
// Detections drawn over an image so a person can see what the model found: a translucent
// mask, the box and "label score" in a colour per category. Shared by `trainer visualize`
// and the validation pictures written to TensorBoard at each evaluation.
#include <array>
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>

namespace mrcnn::data {

struct DrawnDetection {
  std::array<double, 4> box{};  // x1, y1, x2, y2 in the image's pixels
  std::string label;
  double score = 0;
  int64_t category_id = 0;
};

// Distinct, stable colours per category (golden-ratio hue steps), RGB.
cv::Scalar CategoryColour(int64_t category_id);

// Draws onto `rgb` (CV_8UC3, RGB). `mask`: rows x cols bytes, nonzero inside; nullptr for
// none.
void DrawDetection(cv::Mat& rgb, const DrawnDetection& d, const uint8_t* mask);

}  // namespace mrcnn::data
