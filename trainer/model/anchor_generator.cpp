#include "trainer/model/anchor_generator.h"

#include <ATen/ATen.h>

#include <cmath>

namespace mrcnn::model {

at::Tensor Detectron2Anchors(const std::vector<std::array<int64_t, 2>>& feature_sizes,
                             const std::vector<int64_t>& strides,
                             const std::vector<std::vector<double>>& sizes,
                             const std::vector<std::vector<double>>& aspect_ratios, double offset,
                             const at::Device& device) {
  TORCH_CHECK(feature_sizes.size() == strides.size() && sizes.size() == strides.size() &&
                  aspect_ratios.size() == strides.size(),
              "Detectron2Anchors: one stride, size list and ratio list per level");
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  std::vector<at::Tensor> per_level;
  for (size_t l = 0; l < strides.size(); ++l) {
    // The cell anchors in double, then float32, as Detectron2 builds them from Python floats.
    std::vector<float> cell;
    for (double size : sizes[l]) {
      for (double ratio : aspect_ratios[l]) {
        const double w = std::sqrt(size * size / ratio);
        const double h = ratio * w;
        for (double v : {-w / 2.0, -h / 2.0, w / 2.0, h / 2.0})
          cell.push_back(static_cast<float>(v));
      }
    }
    const at::Tensor base = at::tensor(cell, f32).view({-1, 4}).to(device, /*non_blocking=*/true);
    const double stride = static_cast<double>(strides[l]);
    const auto on_device = f32.device(device);
    const at::Tensor shifts_x = at::arange(
        offset * stride, static_cast<double>(feature_sizes[l][1]) * stride, stride, on_device);
    const at::Tensor shifts_y = at::arange(
        offset * stride, static_cast<double>(feature_sizes[l][0]) * stride, stride, on_device);
    const auto grid = at::meshgrid({shifts_y, shifts_x}, "ij");
    const at::Tensor shift_y = grid[0].reshape({-1});
    const at::Tensor shift_x = grid[1].reshape({-1});
    const at::Tensor shifts = at::stack({shift_x, shift_y, shift_x, shift_y}, 1);
    per_level.push_back((shifts.view({-1, 1, 4}) + base.view({1, -1, 4})).reshape({-1, 4}));
  }
  return at::cat(per_level, 0);
}

}  // namespace mrcnn::model
