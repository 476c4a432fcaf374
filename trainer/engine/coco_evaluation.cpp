#include "trainer/engine/coco_evaluation.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>

#include "common/config_error.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/draw_detections.h"
#include "trainer/data/image_decode.h"
#include "trainer/data/image_encode.h"
#include "trainer/data/mask_rle.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/eval/coco_eval.h"
#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"
#include "trainer/model/inference/inference_state.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/tiles/tile_grid.h"
#include "trainer/model/tiles/tiled_prediction.h"

namespace mrcnn::engine {
namespace {

data::LoaderOptions EvalLoaderOptions(const DatasetSource& source, const model::ModelConfig& mc,
                                      const TrainConfig& config) {
  data::LoaderOptions lo;
  lo.image_root = source.layout.image_dir;
  lo.batch_size = 1;
  lo.num_workers = static_cast<int>(std::max<int64_t>(1, config.GetInt("DATALOADER.NUM_WORKERS")));
  lo.training = false;
  lo.group_by_aspect_ratio = false;
  lo.transform.min_sizes = {mc.min_size_test};
  lo.transform.max_size = mc.max_size_test;
  lo.transform.filter = ResizeFilterOf(mc);
  lo.transform.training = false;
  lo.transform.with_masks = false;
  lo.normalization = NormalizationOf(mc);
  lo.size_divisibility = mc.size_divisibility;
  return lo;
}

// One image's detections on the host: boxes (xyxy, float64), labels, scores, and masks
// thresholded at 0.5 (uint8 [N, 1, H, W]; undefined without masks).
struct HostDetections {
  at::Tensor b, l, s, m;
  explicit HostDetections(const model::ImageResult& r)
      : b(r.boxes.to(torch::kCPU, torch::kDouble).contiguous()),
        l(r.labels.to(torch::kCPU).contiguous()),
        s(r.scores.to(torch::kCPU, torch::kDouble).contiguous()) {
    if (r.masks.defined())
      m = r.masks.ge(0.5).to(torch::kCPU, torch::kUInt8).contiguous();
  }
};

// Appends one image's detections (COCO xywh boxes; RLE masks and keypoints when present).
// Keypoint results keep their boxes, as Detectron2's COCO writer leaves them, so pycocotools'
// loadRes takes their areas from the boxes.
void CollectDetections(const model::ImageResult& r, int64_t image_id, const data::CocoDataset& gt,
                       std::vector<eval::Detection>& boxes, std::vector<eval::Detection>& masks,
                       std::vector<eval::Detection>& keypoints) {
  const HostDetections host(r);
  const at::Tensor &b = host.b, &l = host.l, &s = host.s, &m = host.m;
  const at::Tensor points = r.keypoints.defined()
                                ? r.keypoints.to(torch::kCPU, torch::kDouble).contiguous()
                                : at::Tensor();
  for (int64_t k = 0; k < b.size(0); ++k) {
    eval::Detection d;
    d.image_id = image_id;
    d.category_id = gt.CategoryOfLabel(l[k].item<int64_t>());
    d.score = s[k].item<double>();
    const double* xyxy = b[k].data_ptr<double>();
    d.bbox = std::array<double, 4>{xyxy[0], xyxy[1], xyxy[2] - xyxy[0], xyxy[3] - xyxy[1]};
    boxes.push_back(d);
    if (m.defined()) {
      eval::Detection dm = d;
      dm.bbox.reset();
      dm.segmentation = data::EncodeMask(m[k][0].data_ptr<uint8_t>(), m.size(2), m.size(3));
      masks.push_back(std::move(dm));
    }
    if (points.defined()) {
      eval::Detection dk = d;
      const double* p = points[k].data_ptr<double>();
      // COCO's keypoints are pixel indices: the model's continuous coordinates minus 0.5.
      for (int64_t j = 0; j < points.size(1); ++j, p += 3)
        dk.keypoints.insert(dk.keypoints.end(), {p[0] - 0.5, p[1] - 0.5, p[2]});
      keypoints.push_back(std::move(dk));
    }
  }
}

// The image file with `r`'s confident detections drawn over it, as a TensorBoard image.
ImageEvent DrawnImage(const model::ImageResult& r, const data::CocoImage& image,
                      const DatasetSource& source, const data::CocoDataset& gt, int64_t iteration) {
  constexpr double kShownScore = 0.5;
  cv::Mat rgb = data::DecodeImageRgb(source.layout.image_dir / image.file_name);
  const HostDetections host(r);
  const at::Tensor &b = host.b, &l = host.l, &s = host.s, &m = host.m;
  const bool masks_fit = m.defined() && m.size(2) == rgb.rows && m.size(3) == rgb.cols;
  const at::Tensor points = r.keypoints.defined()
                                ? r.keypoints.to(torch::kCPU, torch::kDouble).contiguous()
                                : at::Tensor();
  for (int64_t k = b.size(0) - 1; k >= 0; --k) {  // the best drawn last, on top
    const double score = s[k].item<double>();
    if (score < kShownScore)
      continue;
    const double* xyxy = b[k].data_ptr<double>();
    const int64_t label = l[k].item<int64_t>();
    const int64_t category = gt.CategoryOfLabel(label);  // checks the label's range
    const std::string& name = gt.categories()[static_cast<size_t>(label - 1)].name;
    data::DrawnDetection drawn{{xyxy[0], xyxy[1], xyxy[2], xyxy[3]}, name, score, category};
    if (points.defined()) {
      const double* p = points[k].data_ptr<double>();
      for (int64_t j = 0; j < points.size(1); ++j, p += 3)
        drawn.keypoints.push_back({p[0] - 0.5, p[1] - 0.5, p[2]});  // COCO's pixel indices
      drawn.skeleton = gt.categories()[static_cast<size_t>(label - 1)].skeleton;
    }
    data::DrawDetection(rgb, drawn, masks_fit ? m[k][0].data_ptr<uint8_t>() : nullptr);
  }
  return {iteration, "val/" + image.file_name, rgb.rows, rgb.cols, 3, data::EncodePngRgb(rgb)};
}

// Every image of the channel decoded whole and predicted by tiles.
void CollectTiledDetections(model::MetaArchitecture& net, const DatasetSource& source,
                            const data::CocoDataset& images, const data::CocoDataset& gt,
                            const model::PredictOptions& options, const c10::Device& device,
                            std::vector<eval::Detection>& boxes,
                            std::vector<eval::Detection>& masks,
                            std::vector<eval::Detection>& keypoints) {
  const model::BatchForward forward = [&net](const model::ModelInputs& tiles) {
    return model::TakeInstances(net.forward(tiles.images, std::nullopt, tiles.output_sizes));
  };
  for (const data::CocoImage& image : images.images()) {
    cv::Mat rgb = data::DecodeImageRgb(source.layout.image_dir / image.file_name);
    if (!rgb.isContinuous())
      rgb = rgb.clone();
    const at::Tensor hwc = torch::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, torch::kByte);
    for (const model::TiledDetection& t : model::PredictTiled(net, forward, device, hwc, options)) {
      eval::Detection d;
      d.image_id = image.id;
      d.category_id = gt.CategoryOfLabel(t.label);
      d.score = t.score;
      d.bbox = std::array<double, 4>{t.box[0], t.box[1], t.box[2] - t.box[0], t.box[3] - t.box[1]};
      boxes.push_back(d);
      if (options.masks) {
        eval::Detection dm = d;
        dm.bbox.reset();
        dm.segmentation =
            data::EncodeMaskRegion(t.mask.bits.data(), t.mask.region, rgb.rows, rgb.cols);
        masks.push_back(std::move(dm));
      }
      if (!t.keypoints.empty()) {
        eval::Detection dk = d;
        for (const auto& p : t.keypoints)  // COCO's pixel indices
          dk.keypoints.insert(dk.keypoints.end(), {p[0] - 0.5, p[1] - 0.5, p[2]});
        keypoints.push_back(std::move(dk));
      }
    }
  }
}

// The evaluation's forward passes in TEST.PRECISION: CUDA autocast for fp16/bf16 on a GPU,
// the CPU fast path's bf16 dense layers on CPU; everything as it was on destruction.
class EvaluationPrecisionScope {
 public:
  EvaluationPrecisionScope(const std::string& precision, bool cuda)
      : cpu_mode_(model::CpuDenseModeOf(cuda ? "fp32" : precision)),
        autocast_(cuda && precision != "fp32") {
    if (autocast_) {
      at::autocast::set_autocast_enabled(at::kCUDA, true);
      at::autocast::set_autocast_dtype(at::kCUDA, precision == "fp16" ? at::kHalf : at::kBFloat16);
    }
  }
  ~EvaluationPrecisionScope() {
    if (autocast_) {
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
  }
  EvaluationPrecisionScope(const EvaluationPrecisionScope&) = delete;
  EvaluationPrecisionScope& operator=(const EvaluationPrecisionScope&) = delete;

 private:
  model::CpuPrecisionScope cpu_mode_;
  bool autocast_;
};

}  // namespace

std::string EvaluationPrecision(const TrainConfig& config, bool cuda) {
  const std::string& asked = config.GetString("TEST.PRECISION");
  try {
    return model::ResolvePrecision(asked, cuda);
  } catch (const std::exception&) {
    throw common::ConfigError(
        "config", "TEST.PRECISION",
        "must be auto, fp32, fp32-fast (CPU), bf16, or fp16 on a CUDA device (evaluation runs on " +
            std::string(cuda ? "CUDA" : "CPU") + "), got '" + asked + "'");
  }
}

model::TileOptions EvaluationTiles(const TrainConfig& config) {
  model::TileOptions tiles;
  tiles.size = config.GetInt("TEST.TILE.SIZE");
  tiles.overlap = static_cast<float>(config.GetFloat("TEST.TILE.OVERLAP"));
  if (tiles.size < 0) {
    throw common::ConfigError(
        "config", "TEST.TILE.SIZE",
        "must be >= 0 (the tile side in pixels; 0 evaluates whole images), got " +
            std::to_string(tiles.size));
  }
  if (!(tiles.overlap >= 0.0f && tiles.overlap <= 0.9f)) {
    throw common::ConfigError(
        "config", "TEST.TILE.OVERLAP",
        "must be a fraction within [0, 0.9] (0.2 shares a fifth of each tile), got " +
            std::to_string(tiles.overlap));
  }
  const int64_t cap = config.GetInt("TEST.TILE.MAX_DETECTIONS_CAP");
  if (cap < 1 || cap > 1000000) {
    throw common::ConfigError(
        "config", "TEST.TILE.MAX_DETECTIONS_CAP",
        "must be within [1, 1000000] (detections a tiled image keeps), got " + std::to_string(cap));
  }
  return tiles;
}

namespace {

// TEST.KEYPOINT_OKS_SIGMAS, one per keypoint; empty: COCO's 17 (pycocotools' default), which
// only fits 17-keypoint models.
std::vector<double> KeypointOksSigmas(const TrainConfig& config, const model::ModelConfig& mc) {
  const std::vector<double>& sigmas = config.GetFloatList("TEST.KEYPOINT_OKS_SIGMAS");
  const size_t wanted = static_cast<size_t>(mc.num_keypoints);
  if (sigmas.empty() && wanted != eval::CocoPersonOksSigmas().size()) {
    throw common::ConfigError("config", "TEST.KEYPOINT_OKS_SIGMAS",
                              "is empty (COCO's 17 person sigmas) but the model has " +
                                  std::to_string(wanted) +
                                  " keypoints: give one OKS sigma per keypoint, e.g. [" +
                                  std::string(wanted > 1 ? "0.05, ..., 0.05" : "0.05") + "]");
  }
  if (!sigmas.empty() && sigmas.size() != wanted) {
    throw common::ConfigError("config", "TEST.KEYPOINT_OKS_SIGMAS",
                              "has " + std::to_string(sigmas.size()) + " sigmas for " +
                                  std::to_string(wanted) +
                                  " keypoints: give one per keypoint (or none for COCO's 17)");
  }
  for (double s : sigmas) {
    if (!(s > 0))
      throw common::ConfigError("config", "TEST.KEYPOINT_OKS_SIGMAS",
                                "has " + std::to_string(s) + ": every sigma must be > 0");
  }
  return sigmas;
}

}  // namespace

EvaluationOutput EvaluateChannel(model::MetaArchitecture& net, const DatasetSource& source,
                                 const model::ModelConfig& mc, const TrainConfig& config,
                                 const c10::Device& device, int64_t iteration) {
  // Checked before any inference, so a wrong count fails the first evaluation at once.
  const std::vector<double> oks_sigmas =
      mc.keypoint_on ? KeypointOksSigmas(config, mc) : std::vector<double>{};
  auto ground_truth =
      data::CocoDataset::Load(source.layout.annotation_file, eval::GroundTruthLoadOptions());
  data::CocoLoadOptions view;
  view.load_segmentation = false;
  auto images = std::make_shared<const data::CocoDataset>(
      data::CocoDataset::Load(source.layout.annotation_file, view));
  const model::TileOptions tiles = EvaluationTiles(config);

  const EvaluationPrecisionScope precision(EvaluationPrecision(config, device.is_cuda()),
                                           device.is_cuda());
  const bool was_training = net.is_training();
  net.eval();
  net.detection_settings().score_thresh = mc.box_score_thresh;
  net.detection_settings().detections_per_image =
      static_cast<int>(config.GetInt("TEST.DETECTIONS_PER_IMAGE"));
  net.detection_settings().masks = mc.mask_on;
  torch::NoGradGuard no_grad;
  std::vector<eval::Detection> boxes, masks, keypoints;
  EvaluationOutput out;
  const auto images_to_draw =
      static_cast<size_t>(std::max<int64_t>(0, config.GetInt("TENSORBOARD.EVAL_IMAGES")));
  if (tiles.size > 0) {
    model::PredictOptions options;
    options.score_threshold = static_cast<float>(mc.box_score_thresh);
    options.max_detections = static_cast<int>(config.GetInt("TEST.DETECTIONS_PER_IMAGE"));
    options.max_detections_cap = static_cast<int>(config.GetInt("TEST.TILE.MAX_DETECTIONS_CAP"));
    options.masks = mc.mask_on;
    options.tiles = tiles;
    CollectTiledDetections(net, source, *images, ground_truth, options, device, boxes, masks,
                           keypoints);
  } else {
    data::DataLoader loader(images, EvalLoaderOptions(source, mc, config));
    while (auto batch = loader.Next()) {
      model::ImageBatch ib = ToImageBatch(*batch, device);
      model::ModelOutput output = net.Heads(ib, net.FeatureStage(ib.tensors), nullptr);
      net.Postprocess(ib, output);
      const std::vector<model::ImageResult> results = model::TakeInstances(std::move(output));
      for (size_t i = 0; i < results.size(); ++i) {
        CollectDetections(results[i], batch->image_ids[i], ground_truth, boxes, masks, keypoints);
        if (out.images.size() < images_to_draw) {
          const auto& image =
              images->images()[static_cast<size_t>(images->ImageIndex(batch->image_ids[i]))];
          out.images.push_back(DrawnImage(results[i], image, source, ground_truth, iteration));
        }
      }
    }
  }
  if (was_training)
    net.train();
  auto metrics = [&](const char* iou_type, const eval::CocoEvalResult& r) {
    EvaluationEvent e{iteration, iou_type, r.stats, {}};
    for (const auto& category : r.per_category)
      e.per_category.emplace_back(category.name, category.ap);
    out.metrics.push_back(std::move(e));
  };
  metrics("bbox", eval::EvaluateCoco(ground_truth, boxes, eval::IouType::kBbox));
  if (mc.mask_on)
    metrics("segm", eval::EvaluateCoco(ground_truth, masks, eval::IouType::kSegm));
  if (mc.keypoint_on) {
    metrics("keypoints", eval::EvaluateCoco(ground_truth, keypoints, eval::IouType::kKeypoints,
                                            eval::CocoEvalParams::ForKeypoints(oks_sigmas)));
  }
  return out;
}

}  // namespace mrcnn::engine
