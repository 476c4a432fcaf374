#pragma once
// Training/test transforms applied to one image and its instances together: in training
// an optional random crop at native resolution (random_crop.h, INPUT.CROP), then resize by
// the shortest edge (one size, or a random pick from a list or a range for multi-scale
// training) capped by a max size, then an optional horizontal flip. The pixels are resized
// with OpenCV's bilinear (torchvision's convention) or Pillow's (Detectron2's: its
// ResizeShortestEdge resizes uint8 with PIL's BILINEAR, pil_bilinear_resize.h); an image
// already at its size is left as it is. Boxes are scaled/flipped
// exactly like the pixels; polygon masks are transformed as coordinates and rasterised at
// the final size (sharper than resizing bitmaps), RLE masks are resized (nearest) and
// flipped. Torch-free; tensors are made in batch.h.
#include <array>
#include <cstdint>
#include <opencv2/core.hpp>
#include <random>
#include <span>
#include <vector>

#include "trainer/data/coco_dataset.h"
#include "trainer/data/crop_spec.h"
#include "trainer/data/resize_shortest_edge.h"

namespace mrcnn::data {

// How the training size is drawn from TransformSpec::min_sizes (INPUT.MIN_SIZE_TRAIN_SAMPLING).
enum class SizeSampling {
  kChoice,  // one of the sizes
  kRange,   // a uniform integer in [min_sizes[0], min_sizes[1]]
};

// The filter that resizes the pixels (masks from RLE are resized nearest either way).
enum class ResizeFilter {
  kOpenCvBilinear,  // cv::resize INTER_LINEAR (torchvision's convention)
  kPilBilinear,     // Pillow's Image.BILINEAR, antialiased when shrinking (Detectron2's)
};

struct TransformSpec {
  std::vector<int64_t> min_sizes{800};  // shortest edge; training picks one at random
  SizeSampling sampling = SizeSampling::kChoice;
  ResizeFilter filter = ResizeFilter::kOpenCvBilinear;
  int64_t max_size = 1333;        // longest edge cap
  double flip_probability = 0.0;  // 0.5 for training
  bool training = false;          // false: use min_sizes.back(), never flip
  bool with_masks = true;
  CropSpec crop;  // training only, before the resize
  // keypoint_flip[k]: the keypoint that k becomes under a horizontal flip (left <-> right);
  // empty: keypoints keep their indices.
  std::vector<int64_t> keypoint_flip;
};

// One image ready for batching (crowd annotations are left out).
struct InstanceSample {
  int64_t image_id = 0;
  int64_t original_height = 0, original_width = 0;  // with a crop: the crop window's
  double scale_y = 1, scale_x = 1;                  // transformed / original
  bool flipped = false;
  cv::Mat image;                            // CV_8UC3 RGB, transformed size
  std::vector<std::array<float, 4>> boxes;  // x0, y0, x1, y1 in transformed pixels
  std::vector<int64_t> labels;              // contiguous 1..K
  std::vector<cv::Mat> masks;               // CV_8U 0/1, transformed size
  // Per instance, K x (x, y, v) in transformed pixels (flips swap the left/right pairs of
  // TransformSpec::keypoint_flip); empty when no annotation has keypoints.
  std::vector<std::vector<std::array<float, 3>>> keypoints;
};

// The shortest edge for one training image: SizeSampling's draw from `rng` when training
// (none when a choice has one size), else min_sizes.back().
int64_t DrawMinSize(const TransformSpec& spec, std::mt19937_64& rng);

// `rgb` (CV_8UC3) resized to height x width with spec's filter; the image itself (not a copy)
// when it has that size already.
cv::Mat ResizeImage(const cv::Mat& rgb, int64_t height, int64_t width, ResizeFilter filter);

// Transforms a decoded image and its annotations. `rng` drives the crop window (when
// spec.training and spec.crop.enabled; drawn first, so that without a crop the draws are
// those of before), the size pick and the flip.
InstanceSample TransformInstances(const cv::Mat& rgb, const CocoImage& image,
                                  std::span<const CocoAnnotation> annotations,
                                  const TransformSpec& spec, std::mt19937_64& rng);

}  // namespace mrcnn::data
