// CPU mask_rle_changes: per mask, a counting pass and a writing pass over the column-major
// pixels (the CUDA kernel's twin; kernels/ops.h states the contract).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <numeric>
#include <tuple>

#include "kernels/mask_rle/mask_rle_args.h"

namespace mrcnn::kernels {
namespace {

int64_t CountChanges(const uint8_t* mask, int64_t pixels) {
  int64_t count = 0;
  bool before = false;
  for (int64_t i = 0; i < pixels; ++i) {
    const bool value = mask[i] != 0;
    count += value != before ? 1 : 0;
    before = value;
  }
  return count;
}

void WriteChanges(const uint8_t* mask, int64_t pixels, int32_t* out) {
  bool before = false;
  for (int64_t i = 0; i < pixels; ++i) {
    const bool value = mask[i] != 0;
    if (value != before) {
      *out++ = static_cast<int32_t>(i);
    }
    before = value;
  }
}

std::tuple<at::Tensor, at::Tensor> MaskRleChanges(const at::Tensor& masks) {
  const at::Tensor column_major = ColumnMajorMasks("mrcnn::mask_rle_changes", masks);
  const int64_t n = column_major.size(0), pixels = column_major.size(1);
  at::Tensor offsets = at::zeros({n + 1}, column_major.options().dtype(at::kLong));
  int64_t* po = offsets.data_ptr<int64_t>();
  const uint8_t* pm = column_major.data_ptr<uint8_t>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      po[i + 1] = CountChanges(pm + i * pixels, pixels);
    }
  });
  std::partial_sum(po, po + n + 1, po);
  at::Tensor changes = at::empty({po[n]}, column_major.options().dtype(at::kInt));
  int32_t* pc = changes.data_ptr<int32_t>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      WriteChanges(pm + i * pixels, pixels, pc + po[i]);
    }
  });
  return {changes, offsets};
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("mask_rle_changes", &MaskRleChanges);
}

}  // namespace mrcnn::kernels
