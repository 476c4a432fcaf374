// CPU box IoU and box encode/decode, operation order as in torchvision so float
// results agree to the last bit or within an ulp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "kernels/box_ops/box_ops_args.h"
#include "kernels/box_ops/box_ops_torchvision.h"

namespace mrcnn::kernels {
namespace {

at::Tensor BoxIouCpu(const at::Tensor& a_in, const at::Tensor& b_in) {
  CheckIouBoxes(a_in, b_in, "mrcnn::box_iou");
  if (!KernelBoxes(a_in, b_in)) {
    return TorchvisionBoxIou(a_in, b_in);
  }
  const at::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t n = a.size(0), m = b.size(0);
  at::Tensor out = at::empty({n, m}, a.options());
  if (n == 0 || m == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "mrcnn::box_iou", [&] {
    const scalar_t* pa = a.data_ptr<scalar_t>();
    const scalar_t* pb = b.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    std::vector<scalar_t> bx1(m), by1(m), bx2(m), by2(m), barea(m);
    for (int64_t j = 0; j < m; ++j) {
      bx1[j] = pb[4 * j];
      by1[j] = pb[4 * j + 1];
      bx2[j] = pb[4 * j + 2];
      by2[j] = pb[4 * j + 3];
      barea[j] = (bx2[j] - bx1[j]) * (by2[j] - by1[j]);
    }
    at::parallel_for(0, n, std::max<int64_t>(1, 32768 / m), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t x1 = pa[4 * i], y1 = pa[4 * i + 1], x2 = pa[4 * i + 2], y2 = pa[4 * i + 3];
        const scalar_t area = (x2 - x1) * (y2 - y1);
        scalar_t* row = o + i * m;
        for (int64_t j = 0; j < m; ++j) {
          const scalar_t w = std::max(std::min(x2, bx2[j]) - std::max(x1, bx1[j]), scalar_t(0));
          const scalar_t h = std::max(std::min(y2, by2[j]) - std::max(y1, by1[j]), scalar_t(0));
          const scalar_t inter = w * h;
          row[j] = inter / (area + barea[j] - inter);
        }
      }
    });
  });
  return out;
}

at::Tensor EncodeBoxesCpu(const at::Tensor& reference_in, const at::Tensor& proposals_in,
                          at::ArrayRef<double> weights) {
  const char* op = "mrcnn::encode_boxes";
  CheckBoxes(reference_in, op, "reference_boxes");
  CheckBoxes(proposals_in, op, "proposals");
  CheckWeights(weights, op);
  TORCH_CHECK(reference_in.size(0) == proposals_in.size(0), op,
              ": reference_boxes and proposals must have the same number of rows");
  if (!KernelBoxes(reference_in, proposals_in)) {
    return TorchvisionEncodeBoxes(reference_in, proposals_in, weights);
  }
  const at::Tensor ref = reference_in.contiguous();
  const at::Tensor prop = proposals_in.to(ref.scalar_type()).contiguous();
  const int64_t n = ref.size(0);
  at::Tensor out = at::empty({n, 4}, ref.options());
  AT_DISPATCH_FLOATING_TYPES(ref.scalar_type(), "box_ops_cpu", [&] {
    const scalar_t* r = ref.data_ptr<scalar_t>();
    const scalar_t* p = prop.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t wx = weights[0], wy = weights[1], ww = weights[2], wh = weights[3];
    const scalar_t half = 0.5;
    at::parallel_for(0, n, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* pi = p + 4 * i;
        const scalar_t* ri = r + 4 * i;
        const scalar_t ex_w = pi[2] - pi[0], ex_h = pi[3] - pi[1];
        const scalar_t ex_cx = pi[0] + half * ex_w, ex_cy = pi[1] + half * ex_h;
        const scalar_t gt_w = ri[2] - ri[0], gt_h = ri[3] - ri[1];
        const scalar_t gt_cx = ri[0] + half * gt_w, gt_cy = ri[1] + half * gt_h;
        o[4 * i] = wx * (gt_cx - ex_cx) / ex_w;
        o[4 * i + 1] = wy * (gt_cy - ex_cy) / ex_h;
        o[4 * i + 2] = ww * std::log(gt_w / ex_w);
        o[4 * i + 3] = wh * std::log(gt_h / ex_h);
      }
    });
  });
  return out;
}

at::Tensor DecodeBoxesCpu(const at::Tensor& codes_in, const at::Tensor& boxes_in,
                          at::ArrayRef<double> weights, double clamp) {
  const char* op = "mrcnn::decode_boxes";
  CheckBoxes(boxes_in, op, "boxes");
  CheckWeights(weights, op);
  TORCH_CHECK(
      codes_in.dim() == 2 && codes_in.size(0) == boxes_in.size(0) && codes_in.size(1) % 4 == 0, op,
      ": rel_codes must be N×4k with N = boxes rows (", boxes_in.size(0), "), got shape ",
      codes_in.sizes());
  if (!KernelDtype(codes_in)) {
    return TorchvisionDecodeBoxes(codes_in, boxes_in, weights, clamp);
  }
  const at::Tensor codes = codes_in.contiguous();
  const at::Tensor boxes = boxes_in.to(codes.scalar_type()).contiguous();
  const int64_t n = codes.size(0), k = codes.size(1) / 4;
  at::Tensor out = at::empty_like(codes);
  AT_DISPATCH_FLOATING_TYPES(codes.scalar_type(), "box_ops_cpu", [&] {
    const scalar_t* c = codes.data_ptr<scalar_t>();
    const scalar_t* b = boxes.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t wx = weights[0], wy = weights[1], ww = weights[2], wh = weights[3];
    const scalar_t clip = static_cast<scalar_t>(clamp);
    const scalar_t half = 0.5;
    at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* bi = b + 4 * i;
        const scalar_t w = bi[2] - bi[0], h = bi[3] - bi[1];
        const scalar_t cx = bi[0] + half * w, cy = bi[1] + half * h;
        for (int64_t j = 0; j < k; ++j) {
          const scalar_t* ci = c + (i * k + j) * 4;
          scalar_t* oi = o + (i * k + j) * 4;
          const scalar_t dx = ci[0] / wx, dy = ci[1] / wy;
          const scalar_t dw = std::min(ci[2] / ww, clip), dh = std::min(ci[3] / wh, clip);
          const scalar_t pcx = dx * w + cx, pcy = dy * h + cy;
          const scalar_t half_w = half * (std::exp(dw) * w), half_h = half * (std::exp(dh) * h);
          oi[0] = pcx - half_w;
          oi[1] = pcy - half_h;
          oi[2] = pcx + half_w;
          oi[3] = pcy + half_h;
        }
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("box_iou", &BoxIouCpu);
  m.impl("encode_boxes", &EncodeBoxesCpu);
  m.impl("decode_boxes", &DecodeBoxesCpu);
}

}  // namespace mrcnn::kernels
