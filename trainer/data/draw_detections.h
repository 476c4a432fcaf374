#pragma once
// Detections drawn over an image so a person can see what the model found: a translucent
// mask, the box and "label score" in a colour per category, and keypoints as dots joined by
// their skeleton. Shared by `trainer visualize`
// and the validation pictures written to TensorBoard at each evaluation.
#include <array>
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace mrcnn::data {

struct DrawnDetection {
  std::array<double, 4> box{};  // x1, y1, x2, y2 in the image's pixels
  std::string label;
  double score = 0;
  int64_t category_id = 0;
  // x, y (COCO's pixel indices) and score per keypoint; those scoring below
  // kKeypointShownScore are left out, and so are the skeleton's lines that reach them.
  std::vector<std::array<double, 3>> keypoints = {};
  std::vector<std::array<int64_t, 2>> skeleton = {};  // 1-based keypoint pairs
};

// Detectron2's visualizer draws keypoints whose probability passes 0.05.
constexpr double kKeypointShownScore = 0.05;

// Distinct, stable colours per category (golden-ratio hue steps), RGB.
cv::Scalar CategoryColour(int64_t category_id);

// Draws onto `rgb` (CV_8UC3, RGB). `mask`: rows x cols bytes, nonzero inside; nullptr for
// none.
void DrawDetection(cv::Mat& rgb, const DrawnDetection& d, const uint8_t* mask);

}  // namespace mrcnn::data
