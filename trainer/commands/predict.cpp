// `trainer predict`: runs a model dir over image files and writes COCO results JSON
// (image_id, category_id, bbox [x, y, w, h], score, segmentation RLE with string counts, and
// for keypoint models keypoints [x, y, score, ...] in COCO's pixel-index convention).
#include <CLI/CLI.hpp>

// No fmt here: LibTorch's include dir ships fmt 12 headers that shadow the system fmt
// this binary links, so fmt calls from a Torch-including TU do not link.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "trainer/commands/command_registry.h"
#include "trainer/data/image_decode.h"
#include "trainer/model/inference/coco_results.h"
#include "trainer/model/inference/inference.h"

namespace mrcnn::trainer {
namespace {

struct PredictArgs {
  std::string model_dir;
  std::vector<std::string> images;
  std::string output;
  std::string annotations;
  float score_threshold = 0.05f;
  int max_detections = 100;
  bool max_detections_given = false;  // --max-detections on the command line
  int max_detections_cap = 1000;
  std::string device = "cpu";
  std::string precision = "auto";  // as the server's MRCNN_SERVING_PRECISION
  int batch_size = 1;
  int threads = 0;
  bool no_masks = false;
  std::string mask_rle = "gpu";
  int64_t tile_size = 0;
  float tile_overlap = 0.2f;
  bool tile_full_image = false;
  int tile_batch = 4;
};

// file name -> image id, from the "images" array of a COCO annotation file. Only that
// array is needed, so it is read directly rather than through the full dataset loader.
std::map<std::string, int64_t> ImageIdsByFileName(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open annotation file (--annotations)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.contains("images") || !j["images"].is_array()) {
    throw std::runtime_error(path + ": has no \"images\" array (is it a COCO annotation file?)");
  }
  std::map<std::string, int64_t> ids;
  for (const auto& image : j["images"]) {
    if (!image.contains("file_name") || !image.contains("id") || !image["id"].is_number_integer()) {
      throw std::runtime_error(path + ": an entry of \"images\" lacks file_name or an integer id");
    }
    ids[std::filesystem::path(image["file_name"].get<std::string>()).filename().string()] =
        image["id"].get<int64_t>();
  }
  return ids;
}

// Contiguous 8-bit RGB, decoded as training and serving decode (a truncated or corrupt
// JPEG/PNG is an error naming the file, never an image with made-up pixels).
cv::Mat ReadRgb(const std::string& path) {
  cv::Mat rgb = data::DecodeImageRgb(path);
  return rgb.isContinuous() ? rgb : rgb.clone();
}

int Run(const PredictArgs& args) {
  std::map<std::string, int64_t> ids;
  if (!args.annotations.empty())
    ids = ImageIdsByFileName(args.annotations);
  model::InferenceOptions options;
  options.device = args.device;
  options.precision = args.precision;
  options.num_threads = args.threads;
  auto model = model::InferenceModel::Load(args.model_dir, options);
  model::PredictOptions predict;
  predict.score_threshold = args.score_threshold;
  predict.max_detections = args.max_detections;
  // An explicit --max-detections also caps a tiled image's merged result; by default that
  // cap grows with the tiles (trainer/model/inference/inference.h PredictOptions).
  predict.tiled_max_detections = args.max_detections_given ? args.max_detections : 0;
  predict.max_detections_cap = args.max_detections_cap;
  predict.masks = !args.no_masks;
  // Masks leave a GPU as RLE change points (4 bytes per change), not H×W bytes each.
  predict.mask_rle = args.mask_rle == "device" ? model::MaskRleWhere::kAlways
                     : args.mask_rle == "host" ? model::MaskRleWhere::kHost
                                               : model::MaskRleWhere::kOnGpu;
  predict.tiles.size = args.tile_size;
  predict.tiles.overlap = args.tile_overlap;
  predict.tiles.full_image = args.tile_full_image;
  predict.tiles.batch = args.tile_batch;

  nlohmann::json results = nlohmann::json::array();
  const size_t batch = static_cast<size_t>(std::max(1, args.batch_size));
  for (size_t start = 0; start < args.images.size(); start += batch) {
    const size_t end = std::min(args.images.size(), start + batch);
    std::vector<cv::Mat> decoded;
    std::vector<model::InferenceModel::ImageView> views;
    for (size_t i = start; i < end; ++i) {
      decoded.push_back(ReadRgb(args.images[i]));
      views.push_back({decoded.back().data, decoded.back().rows, decoded.back().cols});
    }
    auto out = model->Predict(views, predict);
    for (size_t k = 0; k < out.size(); ++k) {
      const size_t i = start + k;
      int64_t image_id = static_cast<int64_t>(i) + 1;
      if (!args.annotations.empty()) {
        const std::string name = std::filesystem::path(args.images[i]).filename().string();
        auto it = ids.find(name);
        if (it == ids.end()) {
          throw std::runtime_error(args.annotations + ": no image with file_name '" + name +
                                   "' (from --images)");
        }
        image_id = it->second;
      }
      for (const auto& d : out[k].detections)
        results.push_back(model::CocoResult(d, image_id, out[k].height, out[k].width));
    }
    std::fprintf(stderr, "predict: %zu/%zu images\n", end, args.images.size());
  }
  std::ofstream out(args.output);
  if (!out)
    throw std::runtime_error(args.output + ": cannot open for writing (--output)");
  out << results.dump() << '\n';
  if (!out)
    throw std::runtime_error(args.output + ": write failed");
  std::fprintf(stderr, "predict: wrote %zu detections to %s\n", results.size(),
               args.output.c_str());
  return 0;
}

const CommandRegistration kPredict{
    "predict", "Run a model dir over images and write COCO results JSON (boxes, scores, RLE masks)",
    [](CLI::App& sub) -> CommandAction {
      auto args = std::make_shared<PredictArgs>();
      sub.add_option("--model-dir", args->model_dir,
                     "Model dir: model.safetensors, config.yaml, classes.json")
          ->required();
      sub.add_option("--images", args->images, "Image files (JPEG or PNG)")->required();
      sub.add_option("--output", args->output, "COCO results JSON to write")->required();
      sub.add_option("--annotations", args->annotations,
                     "COCO annotation JSON: image ids are looked up by file name (else 1, 2, ... "
                     "in --images order)");
      sub.add_option("--score-threshold", args->score_threshold, "Drop detections scoring below")
          ->capture_default_str();
      sub.add_option("--max-detections", args->max_detections,
                     "Detections per image (per tile with --tile-size; given, it also caps a tiled "
                     "image's merged result)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000000))
          ->each([args](const std::string&) { args->max_detections_given = true; });
      sub.add_option("--max-detections-cap", args->max_detections_cap,
                     "Without --max-detections, a tiled image keeps --max-detections per tile "
                     "times its tiles, at most this many")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000000));
      sub.add_option("--device", args->device, "cpu, cuda or cuda:N")->capture_default_str();
      sub.add_option("--precision", args->precision,
                     "auto (bf16 on a CPU with AVX512_BF16, AMX or (arm64) BF16, fp32-fast on "
                     "other CPUs, fp32 on CUDA), fp32 (torchvision's numbers), fp32-fast (CPU "
                     "Winograd, ~1e-5 relative error), bf16, or fp16 on CUDA")
          ->capture_default_str();
      sub.add_option("--batch-size", args->batch_size, "Images per forward pass")
          ->capture_default_str();
      sub.add_option("--threads", args->threads, "Intra-op CPU threads (0 = torch default)")
          ->capture_default_str();
      sub.add_flag("--no-masks", args->no_masks, "Boxes only (skip the mask head)");
      sub.add_option("--mask-rle", args->mask_rle,
                     "Where each mask becomes its COCO RLE: gpu (on the model's device when it is "
                     "a GPU, else on the host), device (on the model's device, a CPU too), host")
          ->capture_default_str()
          ->check(CLI::IsMember({"gpu", "device", "host"}));
      sub.add_option(
             "--tile-size", args->tile_size,
             "Tiled inference of large images: tile side in pixels, each tile run like an image of "
             "its own (0, or a size no smaller than the image: the whole image at once)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--tile-overlap", args->tile_overlap,
                     "Fraction of a tile shared with each neighbour, 0..0.9")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.9));
      sub.add_flag(
          "--tile-full-image", args->tile_full_image,
          "With tiles: also run the whole image at the test size, for objects larger than a tile");
      sub.add_option("--tile-batch", args->tile_batch, "With tiles: tiles per forward pass")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      return [args] { return Run(*args); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
