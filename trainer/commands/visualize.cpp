// `trainer visualize`: draws detections (the server's /invocations answer, or a COCO
// results file) over an image and writes a PNG, so a person can see what the model found.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/commands/command_registry.h"
#include "trainer/data/coco_dataset.h"
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
std::vector<std::array<double, 3>> Keypoints(const json& d, const std::string& path) {
  std::vector<std::array<double, 3>> points;
  if (!d.contains("keypoints"))
    return points;
  const json& k = d.at("keypoints");
  const auto number = [](const json& v) { return v.is_number(); };
  const bool nested =
      k.is_array() && std::all_of(k.begin(), k.end(), [&](const json& p) {
        return p.is_array() && p.size() == 3 && std::all_of(p.begin(), p.end(), number);
      });
  const bool flat = k.is_array() && k.size() % 3 == 0 && std::all_of(k.begin(), k.end(), number);
  if (!nested && !flat)
    throw std::runtime_error(path +
                             ": a detection's \"keypoints\" must be [[x, y, score], ...] (the "
                             "server's answer) or x, y, score triples in one list (COCO results)");
  if (nested) {
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
// `categories` (from --annotations, may be empty) names a COCO result's category.
std::vector<ReadDetection> ReadDetections(const std::string& path, int64_t image_id,
                                          const std::map<int64_t, data::CocoCategory>& categories) {
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
                      Keypoints(d, path)},
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
      const auto named = categories.find(category);
      out.push_back({{{x, y, x + b.at(2).get<double>(), y + b.at(3).get<double>()},
                      named == categories.end() ? std::to_string(category) : named->second.name,
                      field(d, "score").get<double>(),
                      category,
                      Keypoints(d, path)},
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

// The categories of a COCO annotations file (--annotations) by id: the names of a COCO
// results file's categories and the skeletons that join keypoints. Neither the server's answer
// nor COCO results carry a skeleton; the dataset's categories do.
std::map<int64_t, data::CocoCategory> ReadCategories(const std::string& path) {
  std::map<int64_t, data::CocoCategory> by_id;
  if (path.empty())
    return by_id;
  data::CocoLoadOptions options;
  options.validate_annotations = false;  // only the categories are used
  options.load_segmentation = false;
  const data::CocoDataset dataset = data::CocoDataset::Load(path, options);
  for (const data::CocoCategory& c : dataset.categories()) {
    const auto names = static_cast<int64_t>(c.keypoints.size());
    for (const auto& [a, b] : c.skeleton) {
      if (a < 1 || b < 1 || a > names || b > names)
        throw std::runtime_error(
            path + ": category " + std::to_string(c.id) + "'s \"skeleton\" pair [" +
            std::to_string(a) + ", " + std::to_string(b) + "] names a keypoint outside 1.." +
            std::to_string(names) + " (its \"keypoints\" names " + std::to_string(names) + ")");
    }
    by_id.emplace(c.id, c);
  }
  return by_id;
}

int Visualize(const std::string& image_path, const std::string& detections_path,
              const std::string& output_path, double score_threshold, int64_t image_id,
              const std::string& annotations_path) {
  cv::Mat rgb = data::DecodeImageRgb(image_path);
  const auto categories = ReadCategories(annotations_path);
  auto detections = ReadDetections(detections_path, image_id, categories);
  int drawn = 0;
  for (auto& d : detections) {
    if (d.drawn.score < score_threshold)
      continue;
    const auto category = categories.find(d.drawn.category_id);
    if (!d.drawn.keypoints.empty() && category != categories.end() &&
        !category->second.skeleton.empty()) {
      if (d.drawn.keypoints.size() != category->second.keypoints.size())
        throw std::runtime_error(
            detections_path + ": a detection of category " + std::to_string(d.drawn.category_id) +
            " has " + std::to_string(d.drawn.keypoints.size()) + " keypoints, but " +
            annotations_path + " names " + std::to_string(category->second.keypoints.size()) +
            " for it (--annotations: the dataset the model was trained on)");
      d.drawn.skeleton = category->second.skeleton;
    }
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
      auto annotations = std::make_shared<std::string>();
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
      sub.add_option("--annotations", *annotations,
                     "COCO annotations (the model's dataset): its categories name a COCO results "
                     "file's detections and their skeletons join keypoints")
          ->check(CLI::ExistingFile);
      return [=] {
        return Visualize(*image, *detections, *output, *threshold, *image_id, *annotations);
      };
    }};

}  // namespace
}  // namespace mrcnn::trainer
