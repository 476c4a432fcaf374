#pragma once
// The serving binary's view of a detector: a batch of decoded RGB images in, one list of
// detections per image out. The HTTP layer and the inference executor only know this
// interface; the real Mask R-CNN (model_predictor.h) and the deterministic test predictor
// (image_statistics_predictor.h) implement it.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mrcnn::serving {

// 8-bit RGB, row-major height x width x 3, contiguous.
struct RgbImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;
};

struct RgbImageView {
  const uint8_t* rgb = nullptr;
  int64_t height = 0;
  int64_t width = 0;
};

struct Detection {
  std::array<float, 4> box{};  // x1, y1, x2, y2 in original image pixels
  int64_t category_id = 0;     // dataset category id
  std::string label;           // class name
  float score = 0.0f;
  std::vector<uint8_t> mask;  // row-major height x width of 0/1; empty when masks are off
};

struct ImageDetections {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<Detection> detections;  // sorted by descending score
};

// What a caller may ask for per request (X-Amzn-SageMaker-Custom-Attributes).
struct PredictOptions {
  float score_threshold = 0.05f;
  int max_detections = 100;
  bool masks = true;
  bool operator==(const PredictOptions&) const = default;
};

class Predictor {
 public:
  virtual ~Predictor() = default;

  // One result per image, in input order, detections sorted by descending score.
  // Implementations must honour the contract that makes dynamic batching exact: running
  // with a lower score_threshold / higher max_detections / masks on and then filtering
  // gives the same detections as running with the stricter options directly.
  // Called from one thread at a time. Throws on failure (the whole batch fails).
  virtual std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                               const PredictOptions& options) = 0;

  // Human-readable identity for logs ("mask r-cnn from /opt/ml/model on cpu").
  virtual std::string Describe() const = 0;
};

}  // namespace mrcnn::serving
