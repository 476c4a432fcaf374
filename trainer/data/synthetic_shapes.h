#pragma once
// A synthetic COCO dataset of circles, squares and triangles: the project's default
// (demo) dataset and the template of a custom one, optionally with keypoints. Objects have random colours, sizes,
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
  // Large canvases of many small objects (aerial-style test data for tiled inference):
  // with canvas_width > 0 every image is canvas_width x canvas_height (image_size and
  // max_objects are not used) with `objects` shapes each (fewer when they cannot be placed
  // without overlapping much), of diameters within [object_min_size, object_max_size] px.
  int64_t canvas_width = 0;
  int64_t canvas_height = 0;
  int64_t objects = 200;
  double object_min_size = 16;
  double object_max_size = 48;
  // Keypoints for Keypoint R-CNN demos: every shape gets its outline's extreme points
  // (left, top, right, bottom; an extreme edge gives its middle) as COCO keypoints, visible
  // (2) where the shape owns a pixel next to the point, labelled but hidden (1) where a
  // later shape covers it; the categories name them (left/right swap under a flip) and a
  // skeleton joins them in a ring.
  bool keypoints = false;
};

struct ShapesSummary {
  int64_t images = 0;
  int64_t annotations = 0;
};

// Writes annotations/instances_train.json, annotations/instances_val.json and the
// images. Throws std::runtime_error naming the path when it cannot write.
ShapesSummary WriteShapesDataset(const ShapesOptions& options);

}  // namespace mrcnn::data
