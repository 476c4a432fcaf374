#include "trainer/data/batch.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

namespace mrcnn::data {

Batch CollateBatch(const std::vector<InstanceSample>& samples, const Normalization& norm,
                   int64_t size_divisibility) {
  Batch b;
  if (samples.empty())
    return b;
  int64_t max_h = 0, max_w = 0;
  for (const auto& s : samples) {
    max_h = std::max<int64_t>(max_h, s.image.rows);
    max_w = std::max<int64_t>(max_w, s.image.cols);
  }
  if (size_divisibility > 1) {
    max_h = (max_h + size_divisibility - 1) / size_divisibility * size_divisibility;
    max_w = (max_w + size_divisibility - 1) / size_divisibility * size_divisibility;
  }
  const int64_t B = static_cast<int64_t>(samples.size());
  b.images = torch::zeros({B, 3, max_h, max_w}, torch::kFloat32);
  auto acc = b.images.accessor<float, 4>();
  for (int64_t i = 0; i < B; ++i) {
    const InstanceSample& s = samples[static_cast<size_t>(i)];
    const int H = s.image.rows, W = s.image.cols;
    // HWC uint8 -> CHW float with (x/255 - mean) / std in one pass.
    float a[3], c[3];
    for (int ch = 0; ch < 3; ++ch) {
      a[ch] = 1.0f / (255.0f * norm.std[ch]);
      c[ch] = -norm.mean[ch] / norm.std[ch];
    }
    for (int y = 0; y < H; ++y) {
      const uint8_t* row = s.image.ptr<uint8_t>(y);
      for (int ch = 0; ch < 3; ++ch) {
        float* out = &acc[i][ch][y][0];
        for (int x = 0; x < W; ++x)
          out[x] = static_cast<float>(row[3 * x + ch]) * a[ch] + c[ch];
      }
    }
    b.image_sizes.push_back({H, W});
    b.original_sizes.push_back({s.original_height, s.original_width});
    b.image_ids.push_back(s.image_id);
    InstanceTargets t;
    const int64_t N = static_cast<int64_t>(s.boxes.size());
    t.boxes = torch::empty({N, 4}, torch::kFloat32);
    if (N)
      std::memcpy(t.boxes.data_ptr<float>(), s.boxes.data(),
                  sizeof(float) * 4 * static_cast<size_t>(N));
    t.labels = torch::empty({N}, torch::kInt64);
    if (N)
      std::memcpy(t.labels.data_ptr<int64_t>(), s.labels.data(),
                  sizeof(int64_t) * static_cast<size_t>(N));
    const int64_t M = static_cast<int64_t>(s.masks.size());
    t.masks = torch::zeros({M, H, W}, torch::kUInt8);
    for (int64_t k = 0; k < M; ++k) {
      const cv::Mat& m = s.masks[static_cast<size_t>(k)];
      uint8_t* dst = t.masks[k].data_ptr<uint8_t>();
      for (int y = 0; y < H; ++y)
        std::memcpy(dst + static_cast<size_t>(y) * W, m.ptr<uint8_t>(y), static_cast<size_t>(W));
    }
    if (!s.keypoints.empty()) {
      const auto K = static_cast<int64_t>(s.keypoints.front().size());
      t.keypoints = torch::empty({N, K, 3}, torch::kFloat32);
      float* dst = t.keypoints.data_ptr<float>();
      for (const auto& instance : s.keypoints)
        for (const auto& point : instance)
          dst = std::copy(point.begin(), point.end(), dst);
    }
    b.targets.push_back(std::move(t));
  }
  return b;
}

}  // namespace mrcnn::data
