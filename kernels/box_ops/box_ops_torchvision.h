// torchvision's box formulas written with the same ATen operations, for the inputs the
// box kernels do not take (mixed dtypes, float16/bfloat16, integer boxes, batch
// dimensions): results, dtypes and shapes are then torchvision's by construction, on
// any device. The kernels cover the common case (2-D float32/float64 of one dtype).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace mrcnn::kernels {

// torchvision.ops._utils._upcast: float16/bfloat16 -> float32, small integers -> int32.
inline at::Tensor TorchvisionUpcast(const at::Tensor& t) {
  if (t.is_floating_point()) {
    return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
  }
  return t.scalar_type() == at::kInt || t.scalar_type() == at::kLong ? t : t.to(at::kInt);
}

// torchvision.ops.box_area (xyxy): [..., 4] -> [...].
inline at::Tensor TorchvisionBoxArea(const at::Tensor& boxes) {
  const at::Tensor b = TorchvisionUpcast(boxes);
  return (b.select(-1, 2) - b.select(-1, 0)) * (b.select(-1, 3) - b.select(-1, 1));
}

// torchvision.ops.box_iou (xyxy): boxes1 [..., N, 4] (or one box [4]), boxes2
// [..., M, 4] -> [..., N, M]; batch dimensions broadcast, dtypes promote, integer
// boxes give the default float dtype.
inline at::Tensor TorchvisionBoxIou(const at::Tensor& boxes1, const at::Tensor& boxes2) {
  const at::Tensor area1 = TorchvisionBoxArea(boxes1);
  const at::Tensor area2 = TorchvisionBoxArea(boxes2);
  const at::Tensor b1 = boxes1.unsqueeze(-2), b2 = boxes2.unsqueeze(-3);
  const at::Tensor lt = at::maximum(b1.slice(-1, 0, 2), b2.slice(-1, 0, 2));
  const at::Tensor rb = at::minimum(b1.slice(-1, 2, 4), b2.slice(-1, 2, 4));
  const at::Tensor wh = TorchvisionUpcast(rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(-1, 0) * wh.select(-1, 1);
  const at::Tensor uni = area1.unsqueeze(-1) + area2.unsqueeze(-2) - inter;
  return inter / uni;
}

// torchvision BoxCoder.encode_single: weights as 0-dim tensors of the reference dtype
// (filled on the device: a host tensor copied there would wait for the device), the rest
// in promoted dtypes.
inline at::Tensor TorchvisionEncodeBoxes(const at::Tensor& reference_boxes,
                                         const at::Tensor& proposals,
                                         at::ArrayRef<double> weights) {
  std::vector<at::Tensor> w;
  for (const double v : weights)
    w.push_back(at::full({}, v, reference_boxes.options()));
  const at::Tensor p = proposals, r = reference_boxes;
  const at::Tensor ex_w = p.select(1, 2).unsqueeze(1) - p.select(1, 0).unsqueeze(1);
  const at::Tensor ex_h = p.select(1, 3).unsqueeze(1) - p.select(1, 1).unsqueeze(1);
  const at::Tensor ex_cx = p.select(1, 0).unsqueeze(1) + 0.5 * ex_w;
  const at::Tensor ex_cy = p.select(1, 1).unsqueeze(1) + 0.5 * ex_h;
  const at::Tensor gt_w = r.select(1, 2).unsqueeze(1) - r.select(1, 0).unsqueeze(1);
  const at::Tensor gt_h = r.select(1, 3).unsqueeze(1) - r.select(1, 1).unsqueeze(1);
  const at::Tensor gt_cx = r.select(1, 0).unsqueeze(1) + 0.5 * gt_w;
  const at::Tensor gt_cy = r.select(1, 1).unsqueeze(1) + 0.5 * gt_h;
  const at::Tensor dx = w[0] * (gt_cx - ex_cx) / ex_w;
  const at::Tensor dy = w[1] * (gt_cy - ex_cy) / ex_h;
  const at::Tensor dw = w[2] * at::log(gt_w / ex_w);
  const at::Tensor dh = w[3] * at::log(gt_h / ex_h);
  return at::cat({dx, dy, dw, dh}, 1);
}

// torchvision BoxCoder.decode_single: boxes cast to the codes' dtype, weights and the
// clamp as Python floats.
inline at::Tensor TorchvisionDecodeBoxes(const at::Tensor& rel_codes, const at::Tensor& boxes_in,
                                         at::ArrayRef<double> weights, double clamp) {
  const at::Tensor boxes = boxes_in.to(rel_codes.scalar_type());
  const at::Tensor widths = boxes.select(1, 2) - boxes.select(1, 0);
  const at::Tensor heights = boxes.select(1, 3) - boxes.select(1, 1);
  const at::Tensor ctr_x = boxes.select(1, 0) + 0.5 * widths;
  const at::Tensor ctr_y = boxes.select(1, 1) + 0.5 * heights;
  const int64_t cols = rel_codes.size(1);
  const at::Tensor dx = rel_codes.slice(1, 0, cols, 4) / weights[0];
  const at::Tensor dy = rel_codes.slice(1, 1, cols, 4) / weights[1];
  const at::Tensor dw = at::clamp_max(rel_codes.slice(1, 2, cols, 4) / weights[2], clamp);
  const at::Tensor dh = at::clamp_max(rel_codes.slice(1, 3, cols, 4) / weights[3], clamp);
  const at::Tensor pred_ctr_x = dx * widths.unsqueeze(1) + ctr_x.unsqueeze(1);
  const at::Tensor pred_ctr_y = dy * heights.unsqueeze(1) + ctr_y.unsqueeze(1);
  const at::Tensor pred_w = at::exp(dw) * widths.unsqueeze(1);
  const at::Tensor pred_h = at::exp(dh) * heights.unsqueeze(1);
  const at::Tensor c_to_c_h = at::scalar_tensor(0.5, pred_ctr_y.options()) * pred_h;
  const at::Tensor c_to_c_w = at::scalar_tensor(0.5, pred_ctr_x.options()) * pred_w;
  return at::stack({pred_ctr_x - c_to_c_w, pred_ctr_y - c_to_c_h, pred_ctr_x + c_to_c_w,
                    pred_ctr_y + c_to_c_h},
                   2)
      .flatten(1);
}

}  // namespace mrcnn::kernels
