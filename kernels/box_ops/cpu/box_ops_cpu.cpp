// CPU box IoU and box encode/decode, operation order as in torchvision so float
// results agree to the last bit or within an ulp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "kernels/box_ops/box_formulas.h"
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
      barea[j] = BoxArea(pb + 4 * j);
    }
    at::parallel_for(0, n, std::max<int64_t>(1, 32768 / m), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t x1 = pa[4 * i], y1 = pa[4 * i + 1], x2 = pa[4 * i + 2], y2 = pa[4 * i + 3];
        const scalar_t area = BoxArea(pa + 4 * i);
        scalar_t* row = o + i * m;
        for (int64_t j = 0; j < m; ++j) {
          row[j] = BoxIou(x1, y1, x2, y2, area, bx1[j], by1[j], bx2[j], by2[j], barea[j]);
        }
      }
    });
  });
  return out;
}

at::Tensor EncodeBoxesCpu(const at::Tensor& reference_in, const at::Tensor& proposals_in,
                          at::ArrayRef<double> weights) {
  const char* op = "mrcnn::encode_boxes";
  CheckEncodeArgs(reference_in, proposals_in, weights, op);
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
    at::parallel_for(0, n, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        EncodeBox(r + 4 * i, p + 4 * i, wx, wy, ww, wh, o + 4 * i);
      }
    });
  });
  return out;
}

at::Tensor DecodeBoxesCpu(const at::Tensor& codes_in, const at::Tensor& boxes_in,
                          at::ArrayRef<double> weights, double clamp) {
  const char* op = "mrcnn::decode_boxes";
  CheckDecodeArgs(codes_in, boxes_in, weights, op);
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
    at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const DecodeAnchor<scalar_t> anchor = DecodeAnchorOf(b + 4 * i);
        for (int64_t j = 0; j < k; ++j) {
          DecodeBox(anchor, c + (i * k + j) * 4, wx, wy, ww, wh, clip, o + (i * k + j) * 4);
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
