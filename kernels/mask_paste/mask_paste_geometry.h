// Paste box and bilinear source coordinates of torchvision's paste_masks_in_image,
// written once for the CPU and CUDA kernels (the expanded integer boxes come from
// PasteBoxes in mask_paste_args.h). Float operations are spelled out so both devices
// round identically.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MRCNN_HOST_DEVICE __host__ __device__
#else
#define MRCNN_HOST_DEVICE
#endif

namespace mrcnn::kernels {

struct PasteBox {
  int64_t x0, y0, x1, y1;  // expanded box, truncated to integers (inclusive corners)
  int64_t w, h;            // size of the resized mask
};

// The paste box of one expanded integer box (x0, y0, x1, y1) as PasteBoxes gives it:
// torchvision's w = x1 - x0 + 1 (int64, wrapping), at least 1.
MRCNN_HOST_DEVICE inline PasteBox MakePasteBox(const int64_t* corners) {
  PasteBox b;
  b.x0 = corners[0];
  b.y0 = corners[1];
  b.x1 = corners[2];
  b.y1 = corners[3];
  b.w = static_cast<int64_t>(static_cast<uint64_t>(b.x1) - static_cast<uint64_t>(b.x0) + 1);
  b.h = static_cast<int64_t>(static_cast<uint64_t>(b.y1) - static_cast<uint64_t>(b.y0) + 1);
  if (b.w < 1)
    b.w = 1;
  if (b.h < 1)
    b.h = 1;
  return b;
}

// F.interpolate(bilinear, align_corners=False) source index along one axis.
struct LinearTap {
  int64_t i0, i1;
  float l0, l1;
};

MRCNN_HOST_DEVICE inline LinearTap ComputeLinearTap(int64_t dst, int64_t in_size,
                                                    int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
#if defined(__CUDA_ARCH__)
  float src = __fsub_rn(__fmul_rn(scale, __fadd_rn(static_cast<float>(dst), 0.5f)), 0.5f);
#else
  float src = scale * (static_cast<float>(dst) + 0.5f) - 0.5f;
#endif
  if (src < 0.f)
    src = 0.f;
  LinearTap t;
  t.i0 = static_cast<int64_t>(src);
  if (t.i0 > in_size - 1)
    t.i0 = in_size - 1;
  t.i1 = t.i0 + (t.i0 < in_size - 1 ? 1 : 0);
  float l = src - static_cast<float>(t.i0);
  l = l < 0.f ? 0.f : (l > 1.f ? 1.f : l);
  t.l1 = l;
  t.l0 = 1.f - l;
  return t;
}

// Pixel (py, px) of an R×R mask padded by `padding` zero pixels on every side.
template <typename scalar_t>
MRCNN_HOST_DEVICE inline float PaddedMaskValue(const scalar_t* mask, int64_t r, int64_t padding,
                                               int64_t py, int64_t px) {
  py -= padding;
  px -= padding;
  if (py < 0 || py >= r || px < 0 || px >= r)
    return 0.f;
  return static_cast<float>(mask[py * r + px]);
}

}  // namespace mrcnn::kernels
