// `trainer visualize`: draws detections (the server's /invocations answer, or a COCO
// results file) over an image and writes a PNG, so a person can see what the model found.
#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/commands/command_registry.h"
#include "trainer/data/draw_detections.h"
#include "trainer/data/image_decode.h"
#include "trainer/data/image_encode.h"
#include "trainer/data/mask_rle.h"

namespace mrcnn::trainer {
namespace {

using nlohmann::json;

// A detection read from a file, with its mask as the file has it (COCO RLE or null).
struct ReadDetection {
  data::DrawnDetection drawn;
  json mask;
};

// A detection's keypoints: the server's [[x, y, score], ...] or a COCO result's flat list.
std::vector<std::array<double, 3>> Keypoints(const json& d) {
  std::vector<std::array<double, 3>> points;
  if (!d.contains("keypoints"))
    return points;
  const json& k = d.at("keypoints");
  if (!k.empty() && k.at(0).is_array()) {
    for (const auto& p : k)
      points.push_back({p.at(0).get<double>(), p.at(1).get<double>(), p.at(2).get<double>()});
  } else {
    for (size_t i = 0; i + 2 < k.size(); i += 3)
      points.push_back({k.at(i).get<double>(), k.at(i + 1).get<double>(), k.at(i + 2).get<double>()});
  }
  return points;
}

// Accepts the server's answer for one image ({"detections": [...]}), its list form
// ({"predictions": [...]}: the first image), or a COCO results array (bbox as x,y,w,h).
std::vector<ReadDetection> ReadDetections(const std::string& path, int64_t image_id) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open the detections file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  std::vector<ReadDetection> out;
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
      out.push_back({{{b.at(0).get<double>(), b.at(1).get<double>(), b.at(2).get<double>(),
                       b.at(3).get<double>()},
                      d.value("label", std::string()),
                      field(d, "score").get<double>(),
                      d.value("category_id", int64_t{0}),
                      Keypoints(d)},
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
      out.push_back({{{x, y, x + b.at(2).get<double>(), y + b.at(3).get<double>()},
                      std::to_string(category),
                      field(d, "score").get<double>(),
                      category,
                      Keypoints(d)},
                     d.value("segmentation", json())});
    }
    return out;
  }
  throw std::runtime_error(path +
                           ": expected the server's answer ({\"detections\": [...]}) or a COCO "
                           "results array");
}

// The mask of a detection as bytes (empty when it has none); throws when its size is not
// the image's.
std::vector<uint8_t> MaskBits(const json& mask, const cv::Mat& rgb, const std::string& path) {
  if (!mask.is_object())
    return {};
  const auto& size = mask.at("size");
  const int64_t h = size.at(0).get<int64_t>(), w = size.at(1).get<int64_t>();
  if (h != rgb.rows || w != rgb.cols)
    throw std::runtime_error(path + ": a mask of size " + std::to_string(h) + "x" +
                             std::to_string(w) + " does not match the image");
  return data::DecodeMask(data::RleFromString(mask.at("counts").get<std::string>(), h, w));
}

int Visualize(const std::string& image_path, const std::string& detections_path,
              const std::string& output_path, double score_threshold, int64_t image_id) {
  cv::Mat rgb = data::DecodeImageRgb(image_path);
  const auto detections = ReadDetections(detections_path, image_id);
  int drawn = 0;
  for (const auto& d : detections) {
    if (d.drawn.score < score_threshold)
      continue;
    const std::vector<uint8_t> bits = MaskBits(d.mask, rgb, detections_path);
    data::DrawDetection(rgb, d.drawn, bits.empty() ? nullptr : bits.data());
    ++drawn;
  }
  data::WriteImageFile(output_path, rgb);
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
      sub.add_option("--output", *output, "image to write: .png, .jpg or .jpeg")->required();
      sub.add_option("--score-threshold", *threshold, "Draw only detections scoring at least this");
      sub.add_option("--image-id", *image_id,
                     "With a COCO results file: draw only this image_id's detections");
      return [=] { return Visualize(*image, *detections, *output, *threshold, *image_id); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
