// CPU mask paste (torchvision paste_masks_in_image), one fused pass per image row:
// padding, box expansion, bilinear resize and placement without temporaries.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/mask_paste/mask_paste_args.h"
#include "kernels/mask_paste/mask_paste_entry_points.h"
#include "kernels/mask_paste/mask_paste_geometry.h"

namespace mrcnn::kernels {
namespace {

// Pastes every mask into out (N×H×W of out_t, zero-filled by the caller), writing
// Store(value) for each pixel inside its box.
template <typename scalar_t, typename out_t, typename StoreFn>
void PasteRows(const scalar_t* pm, const int64_t* pb, int64_t n, int64_t r, int64_t padding,
               int64_t image_height, int64_t image_width, out_t* po, StoreFn store) {
  const int64_t padded = r + 2 * padding;
  at::parallel_for(0, n * image_height, 16, [&](int64_t begin, int64_t end) {
    std::vector<LinearTap> x_taps;
    int64_t taps_for = -1;
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row / image_height, y = row % image_height;
      const PasteBox box = MakePasteBox(pb + 4 * i);
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
      auto at_padded = [&](int64_t py, int64_t px) {
        return PaddedMaskValue(mask, r, padding, py, px);
      };
      out_t* orow = po + row * image_width;
      for (int64_t x = x_begin; x < x_end; ++x) {
        const LinearTap& tx = x_taps[x - x_begin];
        const float top = tx.l0 * at_padded(ty.i0, tx.i0) + tx.l1 * at_padded(ty.i0, tx.i1);
        const float bottom = tx.l0 * at_padded(ty.i1, tx.i0) + tx.l1 * at_padded(ty.i1, tx.i1);
        orow[x] = store(static_cast<scalar_t>(ty.l0 * top + ty.l1 * bottom));
      }
    }
  });
}

// binary: uint8 output of value >= threshold (compared in the mask dtype, so pixels
// outside every box are 0 >= threshold); otherwise the values in the mask dtype.
at::Tensor Paste(const char* op, const at::Tensor& masks_in, const at::Tensor& boxes_in,
                 int64_t image_height, int64_t image_width, int64_t padding, bool binary,
                 double threshold) {
  CheckPasteArgs(op, masks_in, boxes_in, image_height, image_width, padding);
  const at::Tensor masks = masks_in.contiguous();
  const int64_t n = masks.size(0), r = masks.size(2);
  const at::Tensor boxes = PasteBoxes(boxes_in, r, padding).contiguous();
  at::Tensor out = at::empty({n, 1, image_height, image_width},
                             binary ? masks.options().dtype(at::kByte) : masks.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "mask_paste_cpu", [&] {
        const scalar_t* pm = masks.data_ptr<scalar_t>();
        const int64_t* pb = boxes.data_ptr<int64_t>();
        if (binary) {
          const scalar_t t = static_cast<scalar_t>(threshold);
          out.fill_(static_cast<scalar_t>(0) >= t ? 1 : 0);
          PasteRows(pm, pb, n, r, padding, image_height, image_width, out.data_ptr<uint8_t>(),
                    [t](scalar_t v) { return static_cast<uint8_t>(v >= t ? 1 : 0); });
        } else {
          out.zero_();
          PasteRows(pm, pb, n, r, padding, image_height, image_width, out.data_ptr<scalar_t>(),
                    [](scalar_t v) { return v; });
        }
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("paste_masks", &MaskPasteOps<&Paste>::Probabilities);
  m.impl("paste_masks_binary", &MaskPasteOps<&Paste>::Binary);
}

}  // namespace mrcnn::kernels
