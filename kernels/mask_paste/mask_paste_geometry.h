// Integer paste box and bilinear source coordinates of torchvision's
// paste_masks_in_image, written once for the CPU and CUDA kernels. Float operations
// are spelled out so both devices round identically.
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

// expand_boxes(box, scale) then .to(int64), as torchvision does in float32.
MRCNN_HOST_DEVICE inline PasteBox ComputePasteBox(float bx1, float by1, float bx2, float by2,
                                                  float scale) {
#if defined(__CUDA_ARCH__)
  const float w_half = __fmul_rn(__fmul_rn(__fsub_rn(bx2, bx1), 0.5f), scale);
  const float h_half = __fmul_rn(__fmul_rn(__fsub_rn(by2, by1), 0.5f), scale);
  const float x_c = __fmul_rn(__fadd_rn(bx2, bx1), 0.5f);
  const float y_c = __fmul_rn(__fadd_rn(by2, by1), 0.5f);
  PasteBox b;
  b.x0 = static_cast<int64_t>(__fsub_rn(x_c, w_half));
  b.x1 = static_cast<int64_t>(__fadd_rn(x_c, w_half));
  b.y0 = static_cast<int64_t>(__fsub_rn(y_c, h_half));
  b.y1 = static_cast<int64_t>(__fadd_rn(y_c, h_half));
#else
  const float w_half = ((bx2 - bx1) * 0.5f) * scale;
  const float h_half = ((by2 - by1) * 0.5f) * scale;
  const float x_c = (bx2 + bx1) * 0.5f;
  const float y_c = (by2 + by1) * 0.5f;
  PasteBox b;
  b.x0 = static_cast<int64_t>(x_c - w_half);
  b.x1 = static_cast<int64_t>(x_c + w_half);
  b.y0 = static_cast<int64_t>(y_c - h_half);
  b.y1 = static_cast<int64_t>(y_c + h_half);
#endif
  b.w = b.x1 - b.x0 + 1;
  b.h = b.y1 - b.y0 + 1;
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

// (R + 2·padding) / R in float, as torchvision's expand_boxes scale.
MRCNN_HOST_DEVICE inline float PasteScale(int64_t r, int64_t padding) {
  return static_cast<float>(static_cast<double>(r + 2 * padding) / static_cast<double>(r));
}

}  // namespace mrcnn::kernels
