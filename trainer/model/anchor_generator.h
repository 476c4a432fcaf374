#pragma once
// Detectron2's DefaultAnchorGenerator for one image. It differs from torchvision's
// (kernels::GenerateAnchors) in three ways that matter to Detectron2's weights: the cell
// anchors are not rounded, they are ordered sizes outer and aspect ratios inner (the RPN
// head's output channels follow that order), and the grid uses the level's nominal stride
// (P6: 64) with an offset, not image size / map size.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <vector>

namespace mrcnn::model {

// Level l: map feature_sizes[l] = (H, W), stride strides[l], sizes[l] and aspect_ratios[l].
// Returns sum_l H*W*|sizes_l|*|ratios_l| x 4 float32 on `device`, locations row-major, each
// location's cell anchors in Detectron2's order.
at::Tensor Detectron2Anchors(const std::vector<std::array<int64_t, 2>>& feature_sizes,
                             const std::vector<int64_t>& strides,
                             const std::vector<std::vector<double>>& sizes,
                             const std::vector<std::vector<double>>& aspect_ratios, double offset,
                             const at::Device& device);

}  // namespace mrcnn::model
