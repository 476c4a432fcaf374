#include "serving/models/model_predictor.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <optional>

#include "trainer/model/inference/inference.h"

namespace mrcnn::serving {
namespace {

// The share the calling worker thread follows during its Predict, and what it last applied.
// Thread-local because an OpenMP team's size is a property of the thread that starts it.
thread_local const CoreShare* followed_share = nullptr;
thread_local int applied_threads = 0;

void ApplyShare() {
  const int threads = followed_share->ThreadsNow();
  // Inside a parallel region (an op called from a parallel_for body on this thread) the
  // setting would only last until the region ends.
  if (threads != applied_threads && !at::in_parallel_region()) {
    at::set_num_threads(threads);
    applied_threads = threads;
  }
}

std::unique_ptr<at::ObserverContext> BeforeOp(const at::RecordFunction&) {
  if (followed_share != nullptr) {
    ApplyShare();
  }
  return nullptr;
}

// For one Predict on this thread: sizes every op's thread team from the share as the op starts.
class FollowCoreShare {
 public:
  explicit FollowCoreShare(const CoreShare& share) {
    at::internal::lazy_init_num_threads();  // else the first parallel op would reset our size
    followed_share = &share;
    ApplyShare();
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(BeforeOp).needsInputs(false).needsOutputs(false).scopes(
            {at::RecordScope::FUNCTION}));
  }
  ~FollowCoreShare() {
    at::removeCallback(handle_);
    followed_share = nullptr;
  }
  FollowCoreShare(const FollowCoreShare&) = delete;
  FollowCoreShare& operator=(const FollowCoreShare&) = delete;

 private:
  at::CallbackHandle handle_ = 0;
};

// The serving records of a model batch, once the model's Finish has built them.
class ModelBatch final : public StartedBatch {
 public:
  ModelBatch(std::unique_ptr<model::PendingDetections> pending, bool has_masks)
      : pending_(std::move(pending)), has_masks_(has_masks) {}

  std::vector<ImageDetections> Finish() override {
    std::vector<model::ImageDetections> raw = pending_->Finish();
    pending_.reset();
    std::vector<ImageDetections> results;
    results.reserve(raw.size());
    for (model::ImageDetections& image : raw) {
      ImageDetections out{image.height, image.width, {}, has_masks_};
      out.detections.reserve(image.detections.size());
      for (model::Detection& detection : image.detections) {
        out.detections.push_back(
            Detection{detection.box, detection.category_id, std::move(detection.label_name),
                      detection.score, std::move(detection.mask), detection.mask_region,
                      std::move(detection.mask_rle), std::move(detection.keypoints)});
      }
      results.push_back(std::move(out));
    }
    return results;
  }

 private:
  std::unique_ptr<model::PendingDetections> pending_;
  bool has_masks_;
};

class ModelPredictor final : public Predictor {
 public:
  ModelPredictor(std::unique_ptr<model::InferenceModel> model, std::string description,
                 const CoreShare* core_share, bool overlaps)
      : model_(std::move(model)),
        description_(std::move(description)),
        core_share_(core_share),
        overlaps_(overlaps) {}

  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions& options) override {
    return Start(images, options)->Finish();
  }

  std::unique_ptr<StartedBatch> Start(std::span<const RgbImageView> images,
                                      const PredictOptions& options) override {
    std::optional<FollowCoreShare> follow;
    if (core_share_ != nullptr) {
      follow.emplace(*core_share_);
    }
    std::vector<model::InferenceModel::ImageView> views;
    views.reserve(images.size());
    for (const RgbImageView& image : images) {
      views.push_back({image.rgb, image.height, image.width});
    }
    model::PredictOptions model_options;
    model_options.score_threshold = options.score_threshold;
    model_options.max_detections = options.max_detections;
    model_options.tiled_max_detections = options.tiled_max_detections;
    model_options.max_detections_cap = options.max_detections_cap;
    model_options.masks = options.masks;
    // Every response carries masks as RLE: on a GPU they are encoded there.
    model_options.mask_rle = model::MaskRleWhere::kOnGpu;
    model_options.tiles.size = options.tile_size;
    model_options.tiles.overlap = options.tile_overlap;
    model_options.tiles.full_image = options.tile_full_image;
    return std::make_unique<ModelBatch>(model_->Start(views, model_options), model_->HasMasks());
  }

  // On a GPU the forward is the device's and the rest the host's: the two overlap. On a CPU
  // both take the same cores, which the executor's workers already keep busy.
  bool Overlaps() const override { return overlaps_; }

  PredictorOutputs Outputs() const override {
    return {model_->HasMasks(), model_->NumKeypoints(), "mrcnn_libtorch"};
  }

  std::string Describe() const override { return description_; }

 private:
  std::unique_ptr<model::InferenceModel> model_;
  std::string description_;
  const CoreShare* core_share_;
  bool overlaps_;
};

}  // namespace

std::unique_ptr<Predictor> LoadModelPredictor(const std::filesystem::path& model_dir,
                                              const ModelPredictorOptions& options) {
  model::InferenceOptions model_options;
  model_options.device = options.device;
  model_options.precision = options.precision;
  model_options.num_threads = options.num_threads;
  auto model = model::InferenceModel::Load(model_dir, model_options);
  const size_t classes = model->ClassNames().size();
  return std::make_unique<ModelPredictor>(
      std::move(model),
      fmt::format("Mask R-CNN from {} ({} classes) on {} in precision {} (asked: {})",
                  model_dir.string(), classes, options.device, model->Precision(),
                  options.precision),
      options.core_share, options.device.starts_with("cuda"));
}

}  // namespace mrcnn::serving
