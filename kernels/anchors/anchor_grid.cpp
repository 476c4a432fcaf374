// Anchors with the same tensor operations (and so the same float rounding) as
// torchvision's AnchorGenerator.generate_anchors / grid_anchors.
#include "kernels/anchors/anchor_grid.h"

#include <ATen/ATen.h>

#include <vector>

namespace mrcnn::kernels {

at::Tensor GenerateAnchorGrid(at::IntArrayRef feature_sizes, at::IntArrayRef strides,
                              at::ArrayRef<double> sizes, at::IntArrayRef sizes_per_level,
                              at::ArrayRef<double> aspect_ratios, at::IntArrayRef ratios_per_level,
                              at::Device device) {
  const char* op = "mrcnn::generate_anchors";
  const size_t levels = sizes_per_level.size();
  TORCH_CHECK(levels > 0, op, ": at least one feature level is required");
  TORCH_CHECK(feature_sizes.size() == 2 * levels && strides.size() == 2 * levels &&
                  ratios_per_level.size() == levels,
              op, ": feature_sizes and strides need (H, W) per level and ratios_per_level one ",
              "count per level; got ", feature_sizes.size(), ", ", strides.size(), " and ",
              ratios_per_level.size(), " entries for ", levels, " levels");
  const auto i32 = at::TensorOptions().dtype(at::kInt).device(device);
  std::vector<at::Tensor> per_level;
  size_t size_at = 0, ratio_at = 0;
  for (size_t l = 0; l < levels; ++l) {
    const int64_t ns = sizes_per_level[l], nr = ratios_per_level[l];
    TORCH_CHECK(ns > 0 && nr > 0, op, ": level ", l, " needs at least one size and one ratio");
    TORCH_CHECK(size_at + ns <= sizes.size() && ratio_at + nr <= aspect_ratios.size(), op,
                ": sizes_per_level/ratios_per_level ask for more values than given");
    TORCH_CHECK(feature_sizes[2 * l] >= 0 && feature_sizes[2 * l + 1] >= 0, op, ": level ", l,
                " has a negative feature size");
    // The cell anchors are a handful of numbers: computed on the CPU (in float32, as
    // torchvision on any device: sqrt, reciprocal and products round the same everywhere)
    // and copied without waiting, since a blocking host-to-device copy waits for all the
    // work queued on the device, every step.
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor scales =
        at::tensor(at::ArrayRef<double>(sizes.data() + size_at, ns), at::kDouble).to(f32);
    const at::Tensor ratios =
        at::tensor(at::ArrayRef<double>(aspect_ratios.data() + ratio_at, nr), at::kDouble).to(f32);
    size_at += ns;
    ratio_at += nr;
    const at::Tensor h_ratios = at::sqrt(ratios);
    const at::Tensor w_ratios = at::reciprocal(h_ratios);
    const at::Tensor ws = (w_ratios.unsqueeze(1) * scales.unsqueeze(0)).view({-1});
    const at::Tensor hs = (h_ratios.unsqueeze(1) * scales.unsqueeze(0)).view({-1});
    const at::Tensor base =
        at::round(at::stack({-ws, -hs, ws, hs}, 1) / 2).to(device, /*non_blocking=*/true);

    // The int32 grid times the stride stays int32, as torchvision's 0-dim int64 stride
    // tensor leaves it (a Scalar does the same, without a tensor to copy to the device).
    const int64_t stride_h = strides[2 * l], stride_w = strides[2 * l + 1];
    const at::Tensor shifts_x = at::arange(0, feature_sizes[2 * l + 1], i32) * stride_w;
    const at::Tensor shifts_y = at::arange(0, feature_sizes[2 * l], i32) * stride_h;
    const auto grid = at::meshgrid({shifts_y, shifts_x}, "ij");
    const at::Tensor shift_y = grid[0].reshape({-1});
    const at::Tensor shift_x = grid[1].reshape({-1});
    const at::Tensor shifts = at::stack({shift_x, shift_y, shift_x, shift_y}, 1);
    per_level.push_back((shifts.view({-1, 1, 4}) + base.view({1, -1, 4})).reshape({-1, 4}));
  }
  return at::cat(per_level, 0);
}

}  // namespace mrcnn::kernels
