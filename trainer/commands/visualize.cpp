// `trainer visualize`: draws detections (the server's /invocations answer, or a COCO
// results file) over an image and writes a PNG, so a person can see what the model found.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/commands/command_registry.h"
#include "trainer/data/image_decode.h"
#include "trainer/data/mask_rle.h"

namespace mrcnn::trainer {
namespace {

using nlohmann::json;

struct DrawnDetection {
  std::array<double, 4> box;  // x1, y1, x2, y2
  std::string label;
  double score = 0;
  int64_t category_id = 0;
  json mask;  // COCO RLE object or null
};

// Distinct, stable colours per category (golden-ratio hue steps).
cv::Scalar CategoryColour(int64_t category_id) {
  const double hue = std::fmod(0.13 + 0.618033988749895 * static_cast<double>(category_id), 1.0);
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hue * 180.0, 200, 255));
  cv::Mat rgb;
  cv::cvtColor(hsv, rgb, cv::COLOR_HSV2RGB);
  const auto px = rgb.at<cv::Vec3b>(0, 0);
  return {static_cast<double>(px[0]), static_cast<double>(px[1]), static_cast<double>(px[2])};
}

// Accepts the server's answer for one image ({"detections": [...]}), its list form
// ({"predictions": [...]}: the first image), or a COCO results array (bbox as x,y,w,h).
std::vector<DrawnDetection> ReadDetections(const std::string& path, int64_t image_id) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open the detections file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  std::vector<DrawnDetection> out;
  auto field = [&](const json& d, const char* key) -> const json& {
    if (!d.contains(key))
      throw std::runtime_error(path + ": a detection has no \"" + key + "\" field");
    return d.at(key);
  };
  if (doc.is_object() && doc.contains("predictions") && doc["predictions"].is_array() &&
      !doc["predictions"].empty())
    doc = doc["predictions"][0];
  if (doc.is_object() && doc.contains("detections")) {
    for (const auto& d : doc["detections"]) {
      const auto& b = field(d, "box");
      out.push_back({{b.at(0).get<double>(), b.at(1).get<double>(), b.at(2).get<double>(),
                      b.at(3).get<double>()},
                     d.value("label", std::string()),
                     field(d, "score").get<double>(),
                     d.value("category_id", int64_t{0}),
                     d.value("mask", json())});
    }
    return out;
  }
  if (doc.is_array()) {
    for (const auto& d : doc) {
      if (image_id >= 0 && d.value("image_id", int64_t{-1}) != image_id)
        continue;
      const auto& b = field(d, "bbox");
      const double x = b.at(0).get<double>(), y = b.at(1).get<double>();
      const int64_t category = field(d, "category_id").get<int64_t>();
      out.push_back({{x, y, x + b.at(2).get<double>(), y + b.at(3).get<double>()},
                     std::to_string(category),
                     field(d, "score").get<double>(),
                     category,
                     d.value("segmentation", json())});
    }
    return out;
  }
  throw std::runtime_error(path +
                           ": expected the server's answer ({\"detections\": [...]}) or a COCO "
                           "results array");
}

void BlendMask(cv::Mat& rgb, const json& mask, const cv::Scalar& colour, const std::string& path) {
  if (!mask.is_object())
    return;
  const auto& size = mask.at("size");
  const int64_t h = size.at(0).get<int64_t>(), w = size.at(1).get<int64_t>();
  if (h != rgb.rows || w != rgb.cols)
    throw std::runtime_error(path + ": a mask of size " + std::to_string(h) + "x" +
                             std::to_string(w) + " does not match the image");
  const data::Rle rle = data::RleFromString(mask.at("counts").get<std::string>(), h, w);
  const std::vector<uint8_t> bits = data::DecodeMask(rle);
  for (int64_t y = 0; y < h; ++y) {
    auto* row = rgb.ptr<cv::Vec3b>(static_cast<int>(y));
    for (int64_t x = 0; x < w; ++x) {
      if (!bits[static_cast<size_t>(y * w + x)])
        continue;
      for (int c = 0; c < 3; ++c)
        row[x][c] = static_cast<uint8_t>(0.5 * row[x][c] + 0.5 * colour[c]);
    }
  }
}

int Visualize(const std::string& image_path, const std::string& detections_path,
              const std::string& output_path, double score_threshold, int64_t image_id) {
  cv::Mat rgb = data::DecodeImageRgb(image_path);
  const auto detections = ReadDetections(detections_path, image_id);
  int drawn = 0;
  for (const auto& d : detections) {
    if (d.score < score_threshold)
      continue;
    const cv::Scalar colour = CategoryColour(d.category_id);
    BlendMask(rgb, d.mask, colour, detections_path);
    const cv::Point p1(static_cast<int>(d.box[0]), static_cast<int>(d.box[1]));
    const cv::Point p2(static_cast<int>(d.box[2]), static_cast<int>(d.box[3]));
    cv::rectangle(rgb, p1, p2, colour, 1);
    char text[96];
    std::snprintf(text, sizeof(text), "%s %.2f", d.label.c_str(), d.score);
    cv::putText(rgb, text, {p1.x, std::max(p1.y - 3, 8)}, cv::FONT_HERSHEY_SIMPLEX, 0.35, colour, 1,
                cv::LINE_AA);
    ++drawn;
  }
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  if (!cv::imwrite(output_path, bgr))
    throw std::runtime_error(output_path + ": cannot write the image (is the extension .png?)");
  std::printf("visualize: drew %d of %zu detections on %s -> %s\n", drawn, detections.size(),
              image_path.c_str(), output_path.c_str());
  return 0;
}

const CommandRegistration kVisualize{
    "visualize",
    "Draw detections (server answer or COCO results) with boxes and masks onto an image",
    [](CLI::App& sub) -> CommandAction {
      auto image = std::make_shared<std::string>();
      auto detections = std::make_shared<std::string>();
      auto output = std::make_shared<std::string>();
      auto threshold = std::make_shared<double>(0.0);
      auto image_id = std::make_shared<int64_t>(-1);
      sub.add_option("--image", *image, "The image the detections are for")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--detections", *detections,
                     "JSON: the server's /invocations answer or a COCO results file")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--output", *output, "PNG to write")->required();
      sub.add_option("--score-threshold", *threshold, "Draw only detections scoring at least this");
      sub.add_option("--image-id", *image_id,
                     "With a COCO results file: draw only this image_id's detections");
      return [=] { return Visualize(*image, *detections, *output, *threshold, *image_id); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
