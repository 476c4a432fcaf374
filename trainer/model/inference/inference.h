#pragma once
// Inference entry point shared by `trainer predict` and the serving binary.
// Torch-free on purpose: callers that only run inference (the HTTP server) include this
// header without paying for <torch/torch.h>; the model lives behind a pimpl.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/mask_rle.h"

namespace mrcnn::model {

struct Detection {
  std::array<float, 4> box{};  // x1, y1, x2, y2 in original image pixels
  int64_t label = 0;           // contiguous 1..K (0 is background and never reported)
  int64_t category_id = 0;     // original dataset category id from classes.json
  std::string label_name;
  float score = 0.0f;
  // Row-major mask_region.height x mask_region.width of 0/1 at original resolution, for the
  // rectangle mask_region of the image (the mask is 0 outside it); empty when masks are off.
  // The region is the detection's paste box within the image (one zero pixel when that is
  // empty), so memory and, on a GPU, the copy to the host grow with the objects and not
  // with the image (data::EncodeMaskRegion makes the full-size RLE).
  std::vector<uint8_t> mask;
  data::MaskRegion mask_region;
  // The full-image RLE instead of mask and mask_region, when PredictOptions::mask_rle had the
  // mask encoded where the model ran (then mask is empty); counts is empty otherwise.
  data::Rle mask_rle;
  // Keypoint R-CNN: per keypoint x, y in original image pixels as COCO writes keypoints
  // (pixel indices: the model's continuous coordinates minus 0.5, as Detectron2's COCO
  // writer does) and its score (the peak's softmax probability over its heatmap, Detectron2's
  // pred_keypoints score); empty for models without keypoints.
  std::vector<std::array<float, 3>> keypoints;
};

// Where untiled inference turns each pasted mask into its COCO RLE (PredictOptions::mask_rle).
enum class MaskRleWhere {
  kHost,    // not at all: Detection::mask holds the pixels, the caller encodes them
  kOnGpu,   // on a CUDA device: mrcnn::mask_rle_changes there, and only the change points
            // (4 bytes each) cross to the host instead of H×W bytes per mask; on a CPU as kHost
            // (the host encoder scans only each mask's nonzero rectangle: faster there)
  kAlways,  // mrcnn::mask_rle_changes on any device (tests compare it with kHost on a CPU)
};

struct ImageDetections {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<Detection> detections;  // sorted by descending score
};

struct InferenceOptions {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"
  // "fp32" (torchvision's numbers up to float rounding); "fp32-fast" (CPU only: Winograd
  // F(4×4)/F(6×6) convolutions, ~1e-5 relative error per layer, see fast_conv.h); "bf16"
  // (CUDA: autocast; CPU: the dense layers in bf16, see fast_conv.h CpuDenseMode); "fp16" on
  // CUDA only; "auto": bf16 on a CPU with AVX512_BF16, AMX-BF16 or (arm64) BF16, fp32-fast
  // on other CPUs, fp32 on CUDA.
  std::string precision = "fp32";
  int num_threads = 0;  // 0 keeps torch's default intra-op thread count
};

// Tiled inference for images much larger than the model's test size (aerial and drone
// photos): the image is cut into overlapping tiles of `size` pixels, each tile runs through
// the model as an image of its own (so it is resized to the test size exactly like a lone
// request of the tile's size: with size = INPUT.MIN_SIZE_TEST the model sees native
// pixels), tiles go through in batches of `batch`, and the detections are merged per class
// (tile_merge.h). Options are checked by Predict (std::invalid_argument naming the field).
struct TileOptions {
  int64_t size = 0;      // tile side in pixels; 0, or no smaller than both image sides: no tiling
  float overlap = 0.2f;  // fraction of a tile shared with each neighbour, within [0, 0.9]
  bool full_image =
      false;               // also run the whole image at the test size (objects larger than a tile)
  float merge_iou = 0.5f;  // NMS over the union of all tiles' detections, per class
  float cut_ios =
      0.5f;       // a fragment cut by a tile edge inside another detection's box (IoS) is dropped
  int batch = 4;  // tiles per forward pass (>= 1)
  bool operator==(const TileOptions&) const = default;
};

struct PredictOptions {
  float score_threshold = 0.05f;  // detections below are dropped (applied before per-class NMS)
  int max_detections = 100;       // per image, after NMS; with tiles: per tile
  // A tiled image's merged result: at most tiled_max_detections when > 0 (the caller set a
  // cap: a request's max_detections, predict's --max-detections); 0 (not set): the cap grows
  // with the image, max_detections per pass (each tile, and the whole-image pass) times the
  // passes, at most max_detections_cap. A 4000x3000 drone image with hundreds of objects then
  // keeps them without its user knowing about the cap (TiledDetectionCap, tiled_prediction.h).
  int tiled_max_detections = 0;
  int max_detections_cap = 1000;
  bool masks = true;            // false skips the mask head and the paste
  float mask_threshold = 0.5f;  // a pasted mask pixel is 1 where its probability >= this
  // Untiled images only: tiled ones keep each mask's box as pixels (Detection::mask_region).
  MaskRleWhere mask_rle = MaskRleWhere::kHost;
  TileOptions tiles;
};

// A batch that InferenceModel::Start has run through the model, its outputs on their way to
// the host.
class PendingDetections {
 public:
  virtual ~PendingDetections() = default;
  // Waits for the outputs' copies and builds each image's detections: what Predict returns.
  // Images are built in parallel on torch's intra-op threads. Called once. Reads nothing of
  // the model but its class names and ids, so it may run on another thread while the
  // model's next Start runs; it must not outlive the model.
  virtual std::vector<ImageDetections> Finish() = 0;
};

class InferenceModel {
 public:
  // model_dir holds model.safetensors, config.yaml and classes.json (see
  // trainer/model/README.md). Throws std::runtime_error naming the offending file, key or
  // field when anything is missing or inconsistent.
  static std::unique_ptr<InferenceModel> Load(const std::filesystem::path& model_dir,
                                              const InferenceOptions& options);

  // 8-bit RGB, row-major H x W x 3, contiguous. The caller decodes images (OpenCV's BGR must
  // be converted by the caller). Pointers need only stay valid for the duration of the call.
  struct ImageView {
    const uint8_t* rgb = nullptr;
    int64_t height = 0;
    int64_t width = 0;
  };

  // One result per input image, in input order. Thread-compatible, not thread-safe: serialise
  // calls on one instance (the server owns one instance per worker).
  std::vector<ImageDetections> Predict(const std::vector<ImageView>& images,
                                       const PredictOptions& options);

  // Predict in two parts, Predict(i, o) == Start(i, o)->Finish(). Start runs the forward pass
  // (tiled images entirely) and queues the outputs' copies to the host: on a CUDA device
  // asynchronously, on a stream of their own after the forward's, into pinned memory that
  // torch's host allocator reuses; a server overlaps one batch's Finish with the next's
  // Start. Same threading rule as Predict for Start; images need only outlive Start.
  std::unique_ptr<PendingDetections> Start(const std::vector<ImageView>& images,
                                           const PredictOptions& options);

  // Class names in contiguous label order: ClassNames()[i] is label i + 1.
  const std::vector<std::string>& ClassNames() const;
  // Dataset category ids in the same order as ClassNames().
  const std::vector<int64_t>& CategoryIds() const;
  // The precision the options' one resolved to: fp32, fp32-fast, fp16 or bf16.
  const std::string& Precision() const;
  // Whether the model predicts masks (false: box-only, e.g. Faster R-CNN or Keypoint R-CNN)
  // and how many keypoints per detection (0 without a keypoint head).
  bool HasMasks() const;
  int64_t NumKeypoints() const;
  // Benchmarks: called with nullptr as each forward pass starts and with each stage's name
  // as it ends (MetaArchitecture::set_phase_hook).
  void SetPhaseHook(std::function<void(const char*)> hook);

  ~InferenceModel();
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;

  struct State;  // defined in inference.cpp

 private:
  explicit InferenceModel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace mrcnn::model
