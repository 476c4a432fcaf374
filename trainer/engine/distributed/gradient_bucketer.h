#pragma once
// Gradient averaging after backward in flat float32 buckets (like DDP's reducer, 25 MB by
// default; layout in gradient_buckets.h): each bucket is copied into one contiguous buffer,
// summed over the ranks by a GradientReducer (TCP ring on CPU, NCCL on GPU), divided by the
// world size and copied back into .grad. Parameters without a gradient count as zeros, so
// every rank reduces the same sizes.
//
// The reference path (DIST.OVERLAP_BACKWARD false): overlapped_bucketer.h launches the same
// buckets from gradient hooks during backward and must give bit-identical gradients.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "trainer/engine/distributed/gradient_buckets.h"

namespace mrcnn::engine::dist {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // In-place sum over the ranks of a contiguous float32 tensor on this rank's device.
  virtual void SumInPlace(at::Tensor& flat) = 0;
};

class GradientBucketer {
 public:
  // params: the trainable float32 parameters, in the same order on every rank.
  GradientBucketer(std::vector<at::Tensor> params, size_t bucket_bytes);
  // Replaces each parameter's gradient by its mean over `world_size` ranks. Parameters
  // without a gradient count as zeros and get one.
  void AllReduceMean(GradientReducer& reducer, int world_size);
  size_t num_buckets() const { return buckets_.size(); }

 private:
  std::vector<at::Tensor> params_;
  std::vector<GradientBucket> buckets_;
};

}  // namespace mrcnn::engine::dist
