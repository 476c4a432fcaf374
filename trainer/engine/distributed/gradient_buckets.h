#pragma once
// The layout of gradient buckets both averaging paths share (gradient_bucketer.h after
// backward, overlapped_bucketer.h during it): parameters packed in reverse registration
// order (roughly the order backward finishes them), a new bucket when the next parameter
// would overflow `bucket_bytes` or sits on another device (a parameter larger than a bucket
// gets one of its own), one contiguous float32 buffer per bucket. One layout for both
// paths means the same ring chunks, hence bit-identical sums whichever path runs.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mrcnn::engine::dist {

struct GradientBucket {
  std::vector<size_t> params;    // indices into the parameter list, in packing order
  std::vector<int64_t> offsets;  // each parameter's first element in `flat`
  int64_t numel = 0;
  at::Tensor flat;  // float32, on the parameters' device
};

// params: the trainable parameters, float32 (throws std::runtime_error naming the first
// that is not), in the same order on every rank.
std::vector<GradientBucket> LayoutGradientBuckets(const std::vector<at::Tensor>& params,
                                                  size_t bucket_bytes);

// Copies `param`'s gradient into its slot `i` of `bucket` (zeros when it has none).
void PackGradient(const at::Tensor& param, GradientBucket& bucket, size_t i);

// Divides the summed bucket by `world_size` and writes each slot into its parameter's
// .grad (creating .grad where there was none).
void UnpackMean(GradientBucket& bucket, std::vector<at::Tensor>& params, int world_size);

}  // namespace mrcnn::engine::dist
