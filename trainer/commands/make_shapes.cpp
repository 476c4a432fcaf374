// `trainer make-shapes`: writes the synthetic shapes COCO dataset (the demo's default).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "trainer/commands/command_registry.h"
#include "trainer/data/synthetic_shapes.h"

namespace mrcnn::trainer {
namespace {

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
      sub.add_option("--max-objects", opt->max_objects, "objects per image, at most")
          ->capture_default_str();
      sub.add_option("--format", opt->format, "png or jpg")->check(CLI::IsMember({"png", "jpg"}));
      return [opt, output] {
        opt->output = *output;
        const auto s = data::WriteShapesDataset(*opt);
        std::printf("make-shapes: wrote %lld images with %lld objects to %s\n",
                    static_cast<long long>(s.images), static_cast<long long>(s.annotations),
                    output->c_str());
        return 0;
      };
    }};

}  // namespace
}  // namespace mrcnn::trainer
