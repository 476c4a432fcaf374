#pragma once
// A deterministic detector for testing the server without trained weights (selected with
// `--predictor statistics`, or automatically when the model directory holds
// statistics_predictor.json). NOT a model: it derives "detections" from pixel statistics so
// that tests can predict the exact output of any image they build.
//
// The image is split into a 2x2 grid (rows at h/2, columns at w/2). In each cell, with
// luminance Y = (299 R + 587 G + 114 B) / 1000 (integer), the pixels with Y above the cell's
// mean Y form one detection: box = their tight box [xmin, ymin, xmax + 1, ymax + 1],
// mask = those pixels, score = mean Y over them / 255, class = the channel (R, G, B) with the
// largest mean over them (first on ties), i.e. class_names[0..2]. Cells without such pixels
// give nothing. Detections are sorted by descending score (cell order on ties), then
// filtered like the real model (score > threshold, at most max_detections).
//
// statistics_predictor.json (every field optional):
//   {"class_names": ["red", "green", "blue"], "category_ids": [1, 2, 3],
//    "load_delay_ms": 0,        sleep while "loading" (keeps /ping at 503)
//    "warmup_delay_ms": 0,      extra sleep in the first Predict (the server's warm-up)
//    "batch_delay_ms": 0,       sleep per Predict call
//    "image_delay_ms": 0,       sleep per image
//    "finish_delay_ms": 0,      > 0: Start computes and Finish sleeps this long, and the
//                               predictor Overlaps() as the model on a GPU does (two batches
//                               in flight in the executor)
//    "fail_on_width": -1,       Predict throws when an image has this width (a 500 test)
//    "fail_load": false}        loading throws (the server must exit non-zero)
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "serving/models/predictor.h"

namespace mrcnn::serving {

struct ImageStatisticsConfig {
  std::vector<std::string> class_names{"red", "green", "blue"};
  std::vector<int64_t> category_ids{1, 2, 3};
  std::chrono::milliseconds load_delay{0};
  std::chrono::milliseconds warmup_delay{0};
  std::chrono::milliseconds batch_delay{0};
  std::chrono::milliseconds image_delay{0};
  std::chrono::milliseconds finish_delay{0};
  int64_t fail_on_width = -1;
  bool fail_load = false;
};

// Reads `file` (missing file = defaults). Throws std::runtime_error naming the file and
// field on a bad value.
ImageStatisticsConfig ReadImageStatisticsConfig(const std::filesystem::path& file);

class ImageStatisticsPredictor final : public Predictor {
 public:
  // Sleeps config.load_delay, or throws when config.fail_load.
  explicit ImageStatisticsPredictor(ImageStatisticsConfig config);

  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions& options) override;
  std::unique_ptr<StartedBatch> Start(std::span<const RgbImageView> images,
                                      const PredictOptions& options) override;
  bool Overlaps() const override { return config_.finish_delay.count() > 0; }
  PredictorOutputs Outputs() const override { return {true, 0, "mrcnn_test_statistics"}; }
  std::string Describe() const override;

 private:
  ImageStatisticsConfig config_;
  bool warmed_up_ = false;
};

}  // namespace mrcnn::serving
