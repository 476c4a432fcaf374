#include "serving/models/predictor_loading.h"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "serving/http/log_line.h"
#include "serving/models/image_statistics_predictor.h"
#ifdef MRCNN_SERVING_WITH_MODEL
#include "serving/models/model_predictor.h"
#endif

namespace mrcnn::serving {
namespace {

void WarmUp(Predictor& predictor) {
  // A 640x480 gradient: big enough to exercise every stage, cheap enough not to delay /ping.
  RgbImage image{480, 640, std::vector<uint8_t>(480 * 640 * 3)};
  for (int64_t y = 0; y < image.height; ++y) {
    for (int64_t x = 0; x < image.width; ++x) {
      uint8_t* pixel = &image.pixels[static_cast<size_t>((y * image.width + x) * 3)];
      pixel[0] = static_cast<uint8_t>(x * 255 / image.width);
      pixel[1] = static_cast<uint8_t>(y * 255 / image.height);
      pixel[2] = 128;
    }
  }
  const RgbImageView view{image.pixels.data(), image.height, image.width};
  const auto results = predictor.Predict(std::span(&view, 1), PredictOptions{});
  if (results.size() != 1) {
    throw std::runtime_error(
        fmt::format("warm-up inference returned {} results for 1 image", results.size()));
  }
}

}  // namespace

InferenceExecutor::Loader MakePredictorLoader(const PredictorSource& source,
                                              const CoreShare* core_share) {
  const std::string kind = ResolvePredictorKind(source);
  return [source, kind, core_share]() -> std::unique_ptr<Predictor> {
    const auto started = std::chrono::steady_clock::now();
    // Said here, with where the path came from, because the model's own loader would only
    // name a file missing inside it.
    std::error_code ec;
    if (!std::filesystem::is_directory(source.model_dir, ec)) {
      throw std::runtime_error(
          fmt::format("the model dir {} (from {}) is not a directory: put the model there, or "
                      "name it with --model-dir, SM_MODEL_DIR, --base-dir or SAGEMAKER_BASE_DIR",
                      source.model_dir.string(), source.model_dir_source));
    }
    std::unique_ptr<Predictor> predictor;
    if (kind == "statistics") {
      predictor = std::make_unique<ImageStatisticsPredictor>(
          ReadImageStatisticsConfig(source.model_dir / kStatisticsPredictorMarker));
    } else {
#ifdef MRCNN_SERVING_WITH_MODEL
      predictor = LoadModelPredictor(
          source.model_dir,
          ModelPredictorOptions{source.device, source.precision, source.num_threads, core_share});
#else
      (void)core_share;
      throw std::runtime_error(
          "this server was built without the model library (trainer/model); rebuild with "
          "LibTorch, or use --predictor statistics for HTTP tests");
#endif
    }
    const auto loaded = std::chrono::steady_clock::now();
    WarmUp(*predictor);
    const auto warmed = std::chrono::steady_clock::now();
    using Ms = std::chrono::duration<double, std::milli>;
    LogLine("loaded {} in {:.0f} ms, warm-up inference {:.0f} ms", predictor->Describe(),
            Ms(loaded - started).count(), Ms(warmed - loaded).count());
    return predictor;
  };
}

}  // namespace mrcnn::serving
