#pragma once
// A synthetic COCO dataset of circles, squares and triangles: the project's default
// (demo) dataset and the template of a custom one. Objects have random colours, sizes,
// rotations and limited overlaps on a noisy plain background; annotations carry the
// visible region as polygons, so occluded parts are not labelled. Deterministic for a seed.
#include <cstdint>
#include <filesystem>
#include <string>

namespace mrcnn::data {

struct ShapesOptions {
  std::filesystem::path output;  // gets annotations/, train/, val/
  int64_t train_images = 200;
  int64_t val_images = 50;
  uint64_t seed = 0;
  int64_t image_size = 192;    // square images of this side, in pixels
  int64_t max_objects = 4;     // per image (at least 1)
  std::string format = "png";  // png or jpg
};

struct ShapesSummary {
  int64_t images = 0;
  int64_t annotations = 0;
};

// Writes annotations/instances_train.json, annotations/instances_val.json and the
// images. Throws std::runtime_error naming the path when it cannot write.
ShapesSummary WriteShapesDataset(const ShapesOptions& options);

}  // namespace mrcnn::data
