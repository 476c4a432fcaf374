#include "trainer/data/draw_detections.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <vector>

namespace mrcnn::data {

cv::Scalar CategoryColour(int64_t category_id) {
  const double hue = std::fmod(0.13 + 0.618033988749895 * static_cast<double>(category_id), 1.0);
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hue * 180.0, 200, 255));
  cv::Mat rgb;
  cv::cvtColor(hsv, rgb, cv::COLOR_HSV2RGB);
  const auto px = rgb.at<cv::Vec3b>(0, 0);
  return {static_cast<double>(px[0]), static_cast<double>(px[1]), static_cast<double>(px[2])};
}

void DrawDetection(cv::Mat& rgb, const DrawnDetection& d, const uint8_t* mask) {
  const cv::Scalar colour = CategoryColour(d.category_id);
  if (mask != nullptr) {
    for (int y = 0; y < rgb.rows; ++y) {
      auto* row = rgb.ptr<cv::Vec3b>(y);
      const uint8_t* bits = mask + static_cast<size_t>(y) * static_cast<size_t>(rgb.cols);
      for (int x = 0; x < rgb.cols; ++x) {
        if (!bits[x])
          continue;
        for (int c = 0; c < 3; ++c)
          row[x][c] = static_cast<uint8_t>(0.5 * row[x][c] + 0.5 * colour[c]);
      }
    }
  }
  const cv::Point p1(static_cast<int>(d.box[0]), static_cast<int>(d.box[1]));
  const cv::Point p2(static_cast<int>(d.box[2]), static_cast<int>(d.box[3]));
  cv::rectangle(rgb, p1, p2, colour, 1);
  const auto shown = [&](int64_t k) {
    return k >= 0 && k < static_cast<int64_t>(d.keypoints.size()) &&
           d.keypoints[static_cast<size_t>(k)][2] >= kKeypointShownScore;
  };
  const auto at = [&](int64_t k) {
    const auto& p = d.keypoints[static_cast<size_t>(k)];
    return cv::Point(static_cast<int>(std::lround(p[0])), static_cast<int>(std::lround(p[1])));
  };
  for (const auto& [a, b] : d.skeleton) {
    if (shown(a - 1) && shown(b - 1))
      cv::line(rgb, at(a - 1), at(b - 1), colour, 1, cv::LINE_AA);
  }
  for (int64_t k = 0; k < static_cast<int64_t>(d.keypoints.size()); ++k) {
    if (shown(k)) {
      cv::circle(rgb, at(k), 2, cv::Scalar(255, 255, 255), cv::FILLED, cv::LINE_AA);
      cv::circle(rgb, at(k), 2, colour, 1, cv::LINE_AA);
    }
  }
  char text[96];
  std::snprintf(text, sizeof(text), "%s %.2f", d.label.c_str(), d.score);
  cv::putText(rgb, text, {p1.x, std::max(p1.y - 3, 8)}, cv::FONT_HERSHEY_SIMPLEX, 0.35, colour, 1,
              cv::LINE_AA);
}

}  // namespace mrcnn::data
