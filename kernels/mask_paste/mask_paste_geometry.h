// Paste box, bilinear source coordinates and the bilinear value of torchvision's
// paste_masks_in_image, written once for the CPU and CUDA kernels (the expanded integer
// boxes come from PasteBoxes in mask_paste_args.h).
//
// The arithmetic is ATen's CPU F.interpolate(bilinear, align_corners=False) for float, as
// torch 2.11's x86-64 and aarch64 builds execute it, operation for operation: GCC contracts
// `a * b + c` in those kernels into fused multiply-adds (the first product of a sum is the
// fused one), and ATen takes one of two kernels by the output size (H + W <= 128: the
// "channels last" kernel with four product weights; else the separable generic one). Every
// fused multiply-add is spelled out here, so the result is bit-identical to torchvision's
// CPU paste: a mask pixel at 0.49999997 lands on the same side of 0.5 (issue 54). The
// remaining products must not be contracted further, which explicit fmaf guarantees: no
// `a * b + c` is left for a compiler to fuse.
#pragma once

#include <cmath>
#include <cstdint>

// Forced inline on the CPU: the CPU kernel has an FMA-ISA copy (mask_paste_cpu.cpp), and a
// helper left out of line would be compiled once, for the baseline ISA, with a libm call per
// fmaf.
#if defined(__CUDACC__)
#define MRCNN_HOST_DEVICE __host__ __device__
#else
#define MRCNN_HOST_DEVICE [[gnu::always_inline]]
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

// a * b + c rounded once, on either device.
MRCNN_HOST_DEVICE inline float FusedMultiplyAdd(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

// a * b rounded on its own (never fused into a neighbouring add by nvcc).
MRCNN_HOST_DEVICE inline float RoundedProduct(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// F.interpolate(bilinear, align_corners=False) source index along one axis.
struct LinearTap {
  int64_t i0, i1;
  float l0, l1;
};

MRCNN_HOST_DEVICE inline LinearTap ComputeLinearTap(int64_t dst, int64_t in_size,
                                                    int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  float src = FusedMultiplyAdd(scale, static_cast<float>(dst) + 0.5f, -0.5f);
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

// Which ATen kernel resizes a mask to out_h × out_w (UpSampleKernel.cpp's
// _use_vectorized_kernel_cond_2d for a one-channel input).
MRCNN_HOST_DEVICE inline bool SmallOutputKernel(int64_t out_h, int64_t out_w) {
  return out_h + out_w <= 128;
}

// The bilinear value from the four source pixels v00 (row ty.i0, column tx.i0), v01, v10,
// v11, as the kernel SmallOutputKernel names computes it.
MRCNN_HOST_DEVICE inline float BilinearValue(float v00, float v01, float v10, float v11,
                                             const LinearTap& ty, const LinearTap& tx,
                                             bool small_output) {
  if (small_output) {
    // out = i00 * w00 + i01 * w01 + i10 * w10 + i11 * w11 with w = h-lambda * w-lambda.
    const float w00 = RoundedProduct(ty.l0, tx.l0), w01 = RoundedProduct(ty.l0, tx.l1);
    const float w10 = RoundedProduct(ty.l1, tx.l0), w11 = RoundedProduct(ty.l1, tx.l1);
    const float first_two = FusedMultiplyAdd(v00, w00, RoundedProduct(v01, w01));
    return FusedMultiplyAdd(v11, w11, FusedMultiplyAdd(v10, w10, first_two));
  }
  // Separable: each row t = v0 * w0 + v1 * w1, then out = t0 * h0 + t1 * h1.
  const float top = FusedMultiplyAdd(v00, tx.l0, RoundedProduct(v01, tx.l1));
  const float bottom = FusedMultiplyAdd(v10, tx.l0, RoundedProduct(v11, tx.l1));
  return FusedMultiplyAdd(top, ty.l0, RoundedProduct(bottom, ty.l1));
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
