#pragma once
// The serving binary's view of a detector: a batch of decoded RGB images in, one list of
// detections per image out. The HTTP layer and the inference executor only know this
// interface; the real Mask R-CNN (model_predictor.h) and the deterministic test predictor
// (image_statistics_predictor.h) implement it.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trainer/data/mask_rle.h"

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
  // Row-major 0/1 of mask_region (the mask is 0 outside it); empty when masks are off. An
  // empty mask_region (the default) means the whole image, height x width. Tiled inference
  // gives each detection's paste box only (memory grows with objects, not with the image).
  std::vector<uint8_t> mask;
  data::MaskRegion mask_region;
  // The full-image RLE, already encoded (a model on a GPU encodes its masks there); when
  // counts is not empty, mask and mask_region are empty and the response writes this.
  data::Rle mask_rle;
  // Keypoint R-CNN: x, y (COCO's pixel indices in the original image) and score per keypoint;
  // empty for other models.
  std::vector<std::array<float, 3>> keypoints;
};

struct ImageDetections {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<Detection> detections;  // sorted by descending score
  // False when the model predicts no masks (a box-only model): answers carry none, whatever
  // the request asked.
  bool has_masks = true;
};

// What a caller may ask for per request (X-Amzn-SageMaker-Custom-Attributes).
struct PredictOptions {
  float score_threshold = 0.05f;
  int max_detections = 100;  // per image; with tiles, per tile
  // A tiled image's merged result (trainer/model/inference/inference.h PredictOptions): at most
  // tiled_max_detections when the request set max_detections, else max_detections per tile
  // times the tiles, at most max_detections_cap (the server's --max-detections-cap).
  int tiled_max_detections = 0;
  int max_detections_cap = 1000;
  bool masks = true;
  // Tiled inference of large images (trainer/model/inference/inference.h TileOptions): tile side in
  // pixels (0: none), the fraction neighbours share, and the extra whole-image pass.
  int64_t tile_size = 0;
  float tile_overlap = 0.2f;
  bool tile_full_image = false;
  bool operator==(const PredictOptions&) const = default;
  // Requests batch together only with the same tiling: merging tiles is no plain NMS, so
  // a tiled request runs with exactly its own options (see inference_executor.h).
  bool SameTiling(const PredictOptions& other) const {
    return tile_size == other.tile_size && tile_overlap == other.tile_overlap &&
           tile_full_image == other.tile_full_image;
  }
};

// A batch whose model run a Predictor has started (Predictor::Start): on a GPU its device work
// is queued and its outputs are on their way to the host; Finish waits for them and does the
// host's share (masks' RLE strings, the detections' records).
class StartedBatch {
 public:
  virtual ~StartedBatch() = default;
  // What Predict would have returned for the batch. Called once, on any one thread; throws on
  // failure (the whole batch fails).
  virtual std::vector<ImageDetections> Finish() = 0;
};

// What a predictor's answers hold, known once it is loaded: protocols that describe a model
// ahead of any request (the Open Inference Protocol's model metadata) read it.
struct PredictorOutputs {
  bool masks = true;      // false for a box-only model (Faster R-CNN, Keypoint R-CNN)
  int64_t keypoints = 0;  // per detection; 0 without a keypoint head
  std::string platform;   // what runs the model, e.g. "mrcnn_libtorch"
  bool operator==(const PredictorOutputs&) const = default;
};

class Predictor {
 public:
  virtual ~Predictor() = default;

  // The default: masks, no keypoints, an unnamed platform.
  virtual PredictorOutputs Outputs() const { return {true, 0, "mrcnn"}; }

  // One result per image, in input order, detections sorted by descending score.
  // Implementations must honour the contract that makes dynamic batching exact: running
  // with a lower score_threshold / higher max_detections / masks on and then filtering
  // gives the same detections as running with the stricter options directly. With
  // tile_size > 0 the executor passes each request's own options (no such contract).
  // Called from one thread at a time. Throws on failure (the whole batch fails).
  virtual std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                               const PredictOptions& options) = 0;

  // Predict in two parts: Start runs what must run in order on this predictor (the forward)
  // and returns the rest. The images need only stay valid until Start returns. The default
  // runs Predict and hands back its results.
  virtual std::unique_ptr<StartedBatch> Start(std::span<const RgbImageView> images,
                                              const PredictOptions& options);

  // Whether Start leaves real work to Finish (a GPU's copies, the host's encoding). Then the
  // executor runs the next batch's Start on this predictor while another thread runs this
  // batch's Finish, so Finish may only read what the next Start leaves alone.
  virtual bool Overlaps() const { return false; }

  // Human-readable identity for logs ("mask r-cnn from /opt/ml/model on cpu").
  virtual std::string Describe() const = 0;
};

namespace detail {
class FinishedBatch final : public StartedBatch {
 public:
  explicit FinishedBatch(std::vector<ImageDetections> results) : results_(std::move(results)) {}
  std::vector<ImageDetections> Finish() override { return std::move(results_); }

 private:
  std::vector<ImageDetections> results_;
};
}  // namespace detail

inline std::unique_ptr<StartedBatch> Predictor::Start(std::span<const RgbImageView> images,
                                                      const PredictOptions& options) {
  return std::make_unique<detail::FinishedBatch>(Predict(images, options));
}

}  // namespace mrcnn::serving
