#include "serving/models/image_statistics_predictor.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace mrcnn::serving {
namespace {

struct Cell {
  int64_t y0, y1, x0, x1;
};

int Luminance(const uint8_t* rgb) {
  return (299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2]) / 1000;
}

}  // namespace

ImageStatisticsConfig ReadImageStatisticsConfig(const std::filesystem::path& file) {
  ImageStatisticsConfig config;
  if (!std::filesystem::exists(file)) {
    return config;
  }
  std::ifstream in(file);
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    throw std::runtime_error(fmt::format("{}: not a JSON object", file.string()));
  }
  try {
    config.class_names = json.value("class_names", config.class_names);
    config.category_ids = json.value("category_ids", config.category_ids);
    config.load_delay = std::chrono::milliseconds(json.value("load_delay_ms", 0));
    config.warmup_delay = std::chrono::milliseconds(json.value("warmup_delay_ms", 0));
    config.batch_delay = std::chrono::milliseconds(json.value("batch_delay_ms", 0));
    config.image_delay = std::chrono::milliseconds(json.value("image_delay_ms", 0));
    config.finish_delay = std::chrono::milliseconds(json.value("finish_delay_ms", 0));
    config.fail_on_width = json.value("fail_on_width", int64_t{-1});
    config.fail_load = json.value("fail_load", false);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", file.string(), e.what()));
  }
  if (config.class_names.size() < 3 || config.category_ids.size() != config.class_names.size()) {
    throw std::runtime_error(
        fmt::format("{}: \"class_names\" needs at least 3 entries and \"category_ids\" as many",
                    file.string()));
  }
  return config;
}

ImageStatisticsPredictor::ImageStatisticsPredictor(ImageStatisticsConfig config)
    : config_(std::move(config)) {
  std::this_thread::sleep_for(config_.load_delay);
  if (config_.fail_load) {
    throw std::runtime_error(
        "statistics predictor: loading fails on purpose (\"fail_load\": true)");
  }
}

std::string ImageStatisticsPredictor::Describe() const {
  return "image-statistics test predictor (not a model)";
}

namespace {

class DelayedFinish final : public StartedBatch {
 public:
  DelayedFinish(std::vector<ImageDetections> results, std::chrono::milliseconds delay)
      : results_(std::move(results)), delay_(delay) {}
  std::vector<ImageDetections> Finish() override {
    std::this_thread::sleep_for(delay_);
    return std::move(results_);
  }

 private:
  std::vector<ImageDetections> results_;
  std::chrono::milliseconds delay_;
};

}  // namespace

std::unique_ptr<StartedBatch> ImageStatisticsPredictor::Start(std::span<const RgbImageView> images,
                                                              const PredictOptions& options) {
  return std::make_unique<DelayedFinish>(Predict(images, options), config_.finish_delay);
}

std::vector<ImageDetections> ImageStatisticsPredictor::Predict(std::span<const RgbImageView> images,
                                                               const PredictOptions& options) {
  if (!warmed_up_) {
    std::this_thread::sleep_for(config_.warmup_delay);
    warmed_up_ = true;
  }
  std::this_thread::sleep_for(config_.batch_delay +
                              config_.image_delay * static_cast<int64_t>(images.size()));
  std::vector<ImageDetections> results;
  for (const RgbImageView& image : images) {
    if (image.width == config_.fail_on_width) {
      throw std::runtime_error(
          fmt::format("statistics predictor: failing on purpose for width {}", image.width));
    }
    ImageDetections out{image.height, image.width, {}};
    const int64_t h2 = image.height / 2;
    const int64_t w2 = image.width / 2;
    const Cell cells[4] = {{0, h2, 0, w2},
                           {0, h2, w2, image.width},
                           {h2, image.height, 0, w2},
                           {h2, image.height, w2, image.width}};
    for (const Cell& cell : cells) {
      const int64_t area = (cell.y1 - cell.y0) * (cell.x1 - cell.x0);
      if (area <= 0) {
        continue;
      }
      int64_t sum = 0;
      for (int64_t y = cell.y0; y < cell.y1; ++y) {
        for (int64_t x = cell.x0; x < cell.x1; ++x) {
          sum += Luminance(image.rgb + (y * image.width + x) * 3);
        }
      }
      // Y > mean  <=>  Y * area > sum, in integers so the rule is exact.
      Detection detection;
      int64_t xmin = image.width, ymin = image.height, xmax = -1, ymax = -1;
      int64_t count = 0, luminance_sum = 0;
      int64_t channel_sum[3] = {0, 0, 0};
      if (options.masks) {
        detection.mask.assign(static_cast<size_t>(image.height * image.width), 0);
      }
      for (int64_t y = cell.y0; y < cell.y1; ++y) {
        for (int64_t x = cell.x0; x < cell.x1; ++x) {
          const uint8_t* rgb = image.rgb + (y * image.width + x) * 3;
          const int luminance = Luminance(rgb);
          if (luminance * area <= sum) {
            continue;
          }
          ++count;
          luminance_sum += luminance;
          for (int c = 0; c < 3; ++c) {
            channel_sum[c] += rgb[c];
          }
          xmin = std::min(xmin, x);
          xmax = std::max(xmax, x);
          ymin = std::min(ymin, y);
          ymax = std::max(ymax, y);
          if (options.masks) {
            detection.mask[static_cast<size_t>(y * image.width + x)] = 1;
          }
        }
      }
      if (count == 0) {
        continue;
      }
      const int channel =
          static_cast<int>(std::max_element(channel_sum, channel_sum + 3) - channel_sum);
      detection.box = {static_cast<float>(xmin), static_cast<float>(ymin),
                       static_cast<float>(xmax + 1), static_cast<float>(ymax + 1)};
      detection.score = static_cast<float>(static_cast<double>(luminance_sum) /
                                           static_cast<double>(count) / 255.0);
      detection.label = config_.class_names[static_cast<size_t>(channel)];
      detection.category_id = config_.category_ids[static_cast<size_t>(channel)];
      out.detections.push_back(std::move(detection));
    }
    std::stable_sort(out.detections.begin(), out.detections.end(),
                     [](const Detection& a, const Detection& b) { return a.score > b.score; });
    std::erase_if(out.detections,
                  [&](const Detection& d) { return !(d.score > options.score_threshold); });
    if (static_cast<int>(out.detections.size()) > options.max_detections) {
      out.detections.resize(static_cast<size_t>(std::max(options.max_detections, 0)));
    }
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace mrcnn::serving
