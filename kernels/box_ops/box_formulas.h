// The box formulas of mrcnn::box_iou, encode_boxes and decode_boxes, one copy for the CPU
// and CUDA kernels, in torchvision's order of operations (BoxCoder, box_iou), with StdMin /
// StdMax so that a NaN propagates as torch.clamp and the CPU kernels propagate it.
#pragma once

#include <c10/macros/Macros.h>

#include "kernels/host_device_math.h"
#include "kernels/std_min_max.h"

namespace mrcnn::kernels {

// (x2 - x1) * (y2 - y1) of an xyxy box.
template <typename T>
C10_HOST_DEVICE inline T BoxArea(const T* b) {
  return RnMul(RnSub(b[2], b[0]), RnSub(b[3], b[1]));
}

// IoU of xyxy boxes p and q with their areas given (the kernels compute each box's once).
template <typename T>
C10_HOST_DEVICE inline T BoxIou(T px1, T py1, T px2, T py2, T area_p, T qx1, T qy1, T qx2, T qy2,
                                T area_q) {
  const T w = StdMax(RnSub(StdMin(px2, qx2), StdMax(px1, qx1)), T(0));
  const T h = StdMax(RnSub(StdMin(py2, qy2), StdMax(py1, qy1)), T(0));
  const T inter = RnMul(w, h);
  return RnDiv(inter, RnSub(RnAdd(area_p, area_q), inter));
}

// BoxCoder.encode_single for one box: the deltas (dx, dy, dw, dh) of `reference` from
// `proposal`, weighted.
template <typename T>
C10_HOST_DEVICE inline void EncodeBox(const T* reference, const T* proposal, T wx, T wy, T ww, T wh,
                                      T* out) {
  const T half = 0.5;
  const T ex_w = RnSub(proposal[2], proposal[0]), ex_h = RnSub(proposal[3], proposal[1]);
  const T ex_cx = RnAdd(proposal[0], RnMul(half, ex_w));
  const T ex_cy = RnAdd(proposal[1], RnMul(half, ex_h));
  const T gt_w = RnSub(reference[2], reference[0]), gt_h = RnSub(reference[3], reference[1]);
  const T gt_cx = RnAdd(reference[0], RnMul(half, gt_w));
  const T gt_cy = RnAdd(reference[1], RnMul(half, gt_h));
  out[0] = RnDiv(RnMul(wx, RnSub(gt_cx, ex_cx)), ex_w);
  out[1] = RnDiv(RnMul(wy, RnSub(gt_cy, ex_cy)), ex_h);
  out[2] = RnMul(ww, HdLog(RnDiv(gt_w, ex_w)));
  out[3] = RnMul(wh, HdLog(RnDiv(gt_h, ex_h)));
}

// Where BoxCoder.decode_single applies codes: a box's width, height and centre.
template <typename T>
struct DecodeAnchor {
  T w, h, cx, cy;
};

template <typename T>
C10_HOST_DEVICE inline DecodeAnchor<T> DecodeAnchorOf(const T* box) {
  const T half = 0.5;
  const T w = RnSub(box[2], box[0]), h = RnSub(box[3], box[1]);
  return {w, h, RnAdd(box[0], RnMul(half, w)), RnAdd(box[1], RnMul(half, h))};
}

// BoxCoder.decode_single for one code: dw and dh clamped at `clip` (torchvision's
// bbox_xform_clip), the box as x1, y1, x2, y2.
template <typename T>
C10_HOST_DEVICE inline void DecodeBox(const DecodeAnchor<T>& a, const T* code, T wx, T wy, T ww,
                                      T wh, T clip, T* out) {
  const T half = 0.5;
  const T dx = RnDiv(code[0], wx), dy = RnDiv(code[1], wy);
  const T dw = StdMin(RnDiv(code[2], ww), clip), dh = StdMin(RnDiv(code[3], wh), clip);
  const T pcx = RnAdd(RnMul(dx, a.w), a.cx), pcy = RnAdd(RnMul(dy, a.h), a.cy);
  const T half_w = RnMul(half, RnMul(HdExp(dw), a.w));
  const T half_h = RnMul(half, RnMul(HdExp(dh), a.h));
  out[0] = RnSub(pcx, half_w);
  out[1] = RnSub(pcy, half_h);
  out[2] = RnAdd(pcx, half_w);
  out[3] = RnAdd(pcy, half_h);
}

}  // namespace mrcnn::kernels
