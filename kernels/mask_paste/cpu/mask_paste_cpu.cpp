// CPU mask paste (torchvision paste_masks_in_image), one fused pass per image row:
// padding, box expansion, bilinear resize and placement without temporaries.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/mask_paste/mask_paste_args.h"
#include "kernels/mask_paste/mask_paste_entry_points.h"
#include "kernels/mask_paste/mask_paste_geometry.h"

namespace mrcnn::kernels {
namespace {

// One paste: N masks (R×R) into out (N×H×W of out_t, zero-filled by the caller), writing
// store(value) for each pixel inside its box.
template <typename scalar_t, typename out_t, typename StoreFn>
struct PasteJob {
  const scalar_t* masks;
  const int64_t* boxes;  // PasteBoxes' expanded integer boxes
  int64_t n, r, padding, image_height, image_width;
  out_t* out;
  StoreFn store;
};

// Rows [begin, end) of the N×H output rows. Inlined into each ISA's copy below: the
// bilinear value's fused multiply-adds are one instruction where the copy's ISA has FMA,
// and a libm call (the same correctly rounded result) where it has not.
template <typename scalar_t, typename out_t, typename StoreFn>
[[gnu::always_inline]] inline void PasteRowRange(const PasteJob<scalar_t, out_t, StoreFn>& job,
                                                 int64_t begin, int64_t end,
                                                 std::vector<LinearTap>& x_taps) {
  const int64_t padded = job.r + 2 * job.padding;
  int64_t taps_for = -1;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t i = row / job.image_height, y = row % job.image_height;
    const PasteBox box = MakePasteBox(job.boxes + 4 * i);
    if (y < std::max<int64_t>(box.y0, 0) || y >= std::min(box.y1 + 1, job.image_height)) {
      continue;
    }
    const int64_t x_begin = std::max<int64_t>(box.x0, 0);
    const int64_t x_end = std::min(box.x1 + 1, job.image_width);
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
    const scalar_t* mask = job.masks + i * job.r * job.r;
    out_t* orow = job.out + row * job.image_width;
    auto paste_row = [&](auto small_output) __attribute__((always_inline)) {
      for (int64_t x = x_begin; x < x_end; ++x) {
        const LinearTap& tx = x_taps[x - x_begin];
        const float v = BilinearValue(PaddedMaskValue(mask, job.r, job.padding, ty.i0, tx.i0),
                                      PaddedMaskValue(mask, job.r, job.padding, ty.i0, tx.i1),
                                      PaddedMaskValue(mask, job.r, job.padding, ty.i1, tx.i0),
                                      PaddedMaskValue(mask, job.r, job.padding, ty.i1, tx.i1), ty,
                                      tx, small_output);
        orow[x] = job.store(static_cast<scalar_t>(v));
      }
    };
    if (SmallOutputKernel(box.h, box.w)) {
      paste_row(std::true_type{});
    } else {
      paste_row(std::false_type{});
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The x86-64 baseline has no FMA instruction: fmaf would be a libm call per operation (the
// paste took 2.2x as long). Every x86 server CPU since 2013 has FMA; this copy runs there.
template <typename scalar_t, typename out_t, typename StoreFn>
[[gnu::target("fma")]] void PasteRowRangeFma(const PasteJob<scalar_t, out_t, StoreFn>& job,
                                             int64_t begin, int64_t end,
                                             std::vector<LinearTap>& x_taps) {
  PasteRowRange(job, begin, end, x_taps);
}

bool CpuHasFma() {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}
#endif

template <typename scalar_t, typename out_t, typename StoreFn>
void PasteRows(const PasteJob<scalar_t, out_t, StoreFn>& job) {
  at::parallel_for(0, job.n * job.image_height, 16, [&](int64_t begin, int64_t end) {
    std::vector<LinearTap> x_taps;
#if defined(__x86_64__) || defined(__i386__)
    if (CpuHasFma()) {
      PasteRowRangeFma(job, begin, end, x_taps);
      return;
    }
#endif
    PasteRowRange(job, begin, end, x_taps);
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
          auto store = [t](scalar_t v) { return static_cast<uint8_t>(v >= t ? 1 : 0); };
          PasteRows(PasteJob<scalar_t, uint8_t, decltype(store)>{
              pm, pb, n, r, padding, image_height, image_width, out.data_ptr<uint8_t>(), store});
        } else {
          out.zero_();
          auto store = [](scalar_t v) { return v; };
          PasteRows(PasteJob<scalar_t, scalar_t, decltype(store)>{
              pm, pb, n, r, padding, image_height, image_width, out.data_ptr<scalar_t>(), store});
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
