#include "serving/model_predictor.h"

#include <fmt/format.h>

#include "trainer/model/inference.h"

namespace mrcnn::serving {
namespace {

class ModelPredictor final : public Predictor {
 public:
  ModelPredictor(std::unique_ptr<model::InferenceModel> model, std::string description)
      : model_(std::move(model)), description_(std::move(description)) {}

  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions& options) override {
    std::vector<model::InferenceModel::ImageView> views;
    views.reserve(images.size());
    for (const RgbImageView& image : images) {
      views.push_back({image.rgb, image.height, image.width});
    }
    model::PredictOptions model_options;
    model_options.score_threshold = options.score_threshold;
    model_options.max_detections = options.max_detections;
    model_options.masks = options.masks;
    std::vector<model::ImageDetections> raw = model_->Predict(views, model_options);
    std::vector<ImageDetections> results;
    results.reserve(raw.size());
    for (model::ImageDetections& image : raw) {
      ImageDetections out{image.height, image.width, {}};
      out.detections.reserve(image.detections.size());
      for (model::Detection& detection : image.detections) {
        out.detections.push_back(Detection{detection.box, detection.category_id,
                                           std::move(detection.label_name), detection.score,
                                           std::move(detection.mask)});
      }
      results.push_back(std::move(out));
    }
    return results;
  }

  std::string Describe() const override { return description_; }

 private:
  std::unique_ptr<model::InferenceModel> model_;
  std::string description_;
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
      fmt::format("Mask R-CNN from {} ({} classes) on {} in {}", model_dir.string(), classes,
                  options.device, options.precision));
}

}  // namespace mrcnn::serving
