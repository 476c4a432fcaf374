#pragma once
// Collation of transformed samples into tensors: images normalised and zero-padded to a
// common size that is a multiple of size_divisibility (32 for FPN), targets per image.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

#include "trainer/data/transforms.h"

namespace mrcnn::data {

struct Normalization {
  // On RGB in [0, 1], like torchvision's GeneralizedRCNNTransform (ImageNet statistics).
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

struct InstanceTargets {
  at::Tensor boxes;   // [N, 4] float32, x0 y0 x1 y1 in the (unpadded) image
  at::Tensor labels;  // [N] int64, 1..K
  at::Tensor masks;   // [N, H, W] uint8 (H, W = the image's size before padding)
  at::Tensor keypoints;  // [N, K, 3] float32 x, y, v in the image; undefined without keypoints
};

struct Batch {
  at::Tensor images;  // [B, 3, Hp, Wp] float32, normalised, zero padding bottom/right
  std::vector<std::array<int64_t, 2>> image_sizes;     // (H, W) before padding
  std::vector<std::array<int64_t, 2>> original_sizes;  // (H, W) of the files
  std::vector<int64_t> image_ids;
  std::vector<InstanceTargets> targets;
  bool empty() const { return image_ids.empty(); }
};

Batch CollateBatch(const std::vector<InstanceSample>& samples, const Normalization& norm,
                   int64_t size_divisibility = 32);

}  // namespace mrcnn::data
