// `trainer make-shapes`: writes the synthetic shapes COCO dataset (the demo's default).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "trainer/commands/command_registry.h"
#include "trainer/data/synthetic_shapes.h"

namespace mrcnn::trainer {
namespace {

// "A<sep>B" as two numbers; throws std::invalid_argument naming the flag and the form.
std::pair<double, double> ParsePair(const std::string& text, char sep, const char* flag,
                                    const char* example) {
  const size_t at = text.find(sep);
  size_t end_a = 0, end_b = 0;
  try {
    if (at != std::string::npos) {
      const double a = std::stod(text.substr(0, at), &end_a);
      const double b = std::stod(text.substr(at + 1), &end_b);
      if (end_a == at && end_b == text.size() - at - 1)
        return {a, b};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string("make-shapes: ") + flag + " must look like " + example +
                              ", got \"" + text + "\"");
}

const CommandRegistration kMakeShapes{
    "make-shapes", "write a synthetic COCO dataset of circles, squares and triangles",
    [](CLI::App& sub) -> CommandAction {
      auto opt = std::make_shared<data::ShapesOptions>();
      auto output = std::make_shared<std::string>();
      sub.add_option("--output", *output, "dataset directory (annotations/, train/, val/)")
          ->required();
      sub.add_option("--train", opt->train_images, "number of training images")
          ->capture_default_str();
      sub.add_option("--val", opt->val_images, "number of validation images")
          ->capture_default_str();
      sub.add_option("--seed", opt->seed, "random seed (same seed, same dataset)")
          ->capture_default_str();
      sub.add_option("--size", opt->image_size, "image side in pixels")->capture_default_str();
      sub.add_flag("--keypoints", opt->keypoints,
                   "give every shape 4 keypoints (its outline's left, top, right and bottom "
                   "extreme points) for Keypoint R-CNN");
      sub.add_option("--max-objects", opt->max_objects, "objects per image, at most")
          ->capture_default_str();
      sub.add_option("--format", opt->format, "png or jpg")->check(CLI::IsMember({"png", "jpg"}));
      auto canvas = std::make_shared<std::string>();
      auto object_size = std::make_shared<std::string>("16-48");
      sub.add_option(
          "--canvas", *canvas,
          "large images WxH (e.g. 4000x3000) of many small objects, for tiled inference; "
          "replaces --size and --max-objects");
      sub.add_option("--objects", opt->objects, "with --canvas: objects per image")
          ->capture_default_str();
      sub.add_option("--object-size", *object_size,
                     "with --canvas: object diameters MIN-MAX in pixels")
          ->capture_default_str();
      return [opt, output, canvas, object_size] {
        opt->output = *output;
        if (!canvas->empty()) {
          const auto [w, h] = ParsePair(*canvas, 'x', "--canvas", "4000x3000");
          opt->canvas_width = static_cast<int64_t>(w);
          opt->canvas_height = static_cast<int64_t>(h);
          std::tie(opt->object_min_size, opt->object_max_size) =
              ParsePair(*object_size, '-', "--object-size", "16-48");
        }
        const auto s = data::WriteShapesDataset(*opt);
        std::printf("make-shapes: wrote %lld images with %lld objects to %s\n",
                    static_cast<long long>(s.images), static_cast<long long>(s.annotations),
                    output->c_str());
        return 0;
      };
    }};

}  // namespace
}  // namespace mrcnn::trainer
