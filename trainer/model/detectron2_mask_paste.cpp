#include "trainer/model/detectron2_mask_paste.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace mrcnn::model {

PasteRegion Detectron2PasteRegion(const float box[4], int64_t image_height, int64_t image_width) {
  // The region's bounds are computed in float32 as Detectron2 computes them
  // (floor(x0) - 1 clamped at 0, ceil(x1) + 1 clamped at the image).
  PasteRegion r;
  r.x0 = std::max<int64_t>(static_cast<int64_t>(std::floor(box[0]) - 1.0f), 0);
  r.y0 = std::max<int64_t>(static_cast<int64_t>(std::floor(box[1]) - 1.0f), 0);
  r.x1 = std::min<int64_t>(static_cast<int64_t>(std::ceil(box[2]) + 1.0f), image_width);
  r.y1 = std::min<int64_t>(static_cast<int64_t>(std::ceil(box[3]) + 1.0f), image_height);
  return r;
}

at::Tensor Detectron2PasteCorners(const at::Tensor& boxes) {
  const at::Tensor b = boxes.to(at::kFloat);
  return at::cat({b.narrow(1, 0, 2).floor() - 1, b.narrow(1, 2, 2).ceil()}, 1).to(at::kLong);
}

at::Tensor SampleMaskOnRegion(const at::Tensor& mask, const at::Tensor& box,
                              const PasteRegion& region) {
  const auto f32 = mask.options().dtype(at::kFloat);
  const int64_t h = std::max<int64_t>(region.y1 - region.y0, 0);
  const int64_t w = std::max<int64_t>(region.x1 - region.x0, 0);
  if (h == 0 || w == 0)
    return at::zeros({h, w}, f32);
  const at::Tensor b = box.to(at::kFloat);
  const at::Tensor x0 = b[0], y0 = b[1], x1 = b[2], y1 = b[3];
  // The same float32 operations, in the same order, as Detectron2's _do_paste_mask.
  at::Tensor img_y = at::arange(region.y0, region.y1, f32) + 0.5;
  at::Tensor img_x = at::arange(region.x0, region.x1, f32) + 0.5;
  img_y = (img_y - y0) / (y1 - y0) * 2 - 1;
  img_x = (img_x - x0) / (x1 - x0) * 2 - 1;
  const at::Tensor gx = img_x.view({1, 1, w}).expand({1, h, w});
  const at::Tensor gy = img_y.view({1, h, 1}).expand({1, h, w});
  const at::Tensor grid = at::stack({gx, gy}, 3);
  const at::Tensor input = mask.to(at::kFloat).reshape({1, 1, mask.size(-2), mask.size(-1)});
  return at::grid_sampler_2d(input, grid, /*interpolation_mode=*/0, /*padding_mode=*/0,
                             /*align_corners=*/false)[0][0];
}

at::Tensor PasteMasksDetectron2(const at::Tensor& masks, const at::Tensor& boxes,
                                int64_t image_height, int64_t image_width, double threshold) {
  const int64_t n = masks.size(0);
  const bool binary = threshold >= 0;
  at::Tensor out = at::zeros({n, 1, image_height, image_width},
                             masks.options().dtype(binary ? at::kByte : at::kFloat));
  if (n == 0)
    return out;
  const at::Tensor host_boxes = boxes.to(at::kCPU, at::kFloat).contiguous();
  const float* b = host_boxes.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const PasteRegion region = Detectron2PasteRegion(b + 4 * i, image_height, image_width);
    if (region.x1 <= region.x0 || region.y1 <= region.y0)
      continue;
    at::Tensor sampled = SampleMaskOnRegion(masks[i], boxes[i], region);
    if (binary)
      sampled = sampled.ge(threshold).to(at::kByte);
    out[i][0].slice(0, region.y0, region.y1).slice(1, region.x0, region.x1).copy_(sampled);
  }
  return out;
}

}  // namespace mrcnn::model
