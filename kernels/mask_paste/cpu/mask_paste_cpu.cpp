// CPU mask paste (torchvision paste_masks_in_image), one fused pass per image row:
// padding, box expansion, bilinear resize and placement without temporaries.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/mask_paste/mask_paste_geometry.h"

namespace mrcnn::kernels {
namespace {

at::Tensor PasteMasksCpu(const at::Tensor& masks_in, const at::Tensor& boxes_in,
                         int64_t image_height, int64_t image_width, int64_t padding) {
  const char* op = "mrcnn::paste_masks";
  TORCH_CHECK(masks_in.dim() == 4 && masks_in.size(1) == 1 && masks_in.size(2) == masks_in.size(3),
              op, ": masks must be N×1×R×R, got shape ", masks_in.sizes());
  TORCH_CHECK(boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == masks_in.size(0),
              op, ": boxes must be N×4 with one box per mask, got shape ", boxes_in.sizes());
  TORCH_CHECK(image_height >= 0 && image_width >= 0 && padding >= 0, op,
              ": image size and padding must be non-negative");
  TORCH_CHECK(masks_in.size(2) > 0, op, ": masks must have a positive resolution");
  const at::Tensor masks = masks_in.contiguous();
  const at::Tensor boxes = boxes_in.to(at::kFloat).contiguous();
  const int64_t n = masks.size(0), r = masks.size(2), padded = r + 2 * padding;
  const float scale = static_cast<float>(static_cast<double>(padded) / static_cast<double>(r));
  at::Tensor out = at::zeros({n, 1, image_height, image_width}, masks.options());
  if (n == 0 || image_height == 0 || image_width == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "mask_paste_cpu", [&] {
        const scalar_t* pm = masks.data_ptr<scalar_t>();
        const float* pb = boxes.data_ptr<float>();
        scalar_t* po = out.data_ptr<scalar_t>();
        at::parallel_for(0, n * image_height, 16, [&](int64_t begin, int64_t end) {
          std::vector<LinearTap> x_taps;
          int64_t taps_for = -1;
          for (int64_t row = begin; row < end; ++row) {
            const int64_t i = row / image_height, y = row % image_height;
            const float* b = pb + 4 * i;
            const PasteBox box = ComputePasteBox(b[0], b[1], b[2], b[3], scale);
            if (y < std::max<int64_t>(box.y0, 0) || y >= std::min(box.y1 + 1, image_height)) {
              continue;
            }
            const int64_t x_begin = std::max<int64_t>(box.x0, 0);
            const int64_t x_end = std::min(box.x1 + 1, image_width);
            if (x_begin >= x_end) {
              continue;
            }
            if (taps_for != i) {
              // Only the visible columns: huge boxes must not allocate their full width.
              x_taps.resize(x_end - x_begin);
              for (int64_t x = x_begin; x < x_end; ++x) {
                x_taps[x - x_begin] = ComputeLinearTap(x - box.x0, padded, box.w);
              }
              taps_for = i;
            }
            const LinearTap ty = ComputeLinearTap(y - box.y0, padded, box.h);
            const scalar_t* mask = pm + i * r * r;
            // Padded-mask pixel (py, px); the padding ring is zero.
            auto at_padded = [&](int64_t py, int64_t px) -> float {
              py -= padding;
              px -= padding;
              if (py < 0 || py >= r || px < 0 || px >= r)
                return 0.f;
              return static_cast<float>(mask[py * r + px]);
            };
            scalar_t* orow = po + row * image_width;
            for (int64_t x = x_begin; x < x_end; ++x) {
              const LinearTap& tx = x_taps[x - x_begin];
              const float top = tx.l0 * at_padded(ty.i0, tx.i0) + tx.l1 * at_padded(ty.i0, tx.i1);
              const float bottom =
                  tx.l0 * at_padded(ty.i1, tx.i0) + tx.l1 * at_padded(ty.i1, tx.i1);
              orow[x] = static_cast<scalar_t>(ty.l0 * top + ty.l1 * bottom);
            }
          }
        });
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("paste_masks", &PasteMasksCpu);
}

}  // namespace mrcnn::kernels
