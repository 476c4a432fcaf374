#pragma once
// Gradient averaging in flat float32 buckets (like DDP's reducer, 25 MB by default):
// parameters are packed in reverse registration order (roughly the order backward
// finishes them), each bucket is copied into one contiguous buffer, summed over the ranks
// by a GradientReducer (TCP ring on CPU, NCCL on GPU), divided by the world size and
// copied back into .grad.
//
// This runs after backward, not overlapped with it through per-parameter hooks. Why:
// the trainer accumulates gradients over SOLVER.ACCUMULATION_STEPS micro-batches (only
// the last backward may communicate), some parameters get no gradient in some steps (they
// must still be reduced, as zeros, or the ranks' bucket sizes diverge), and on the CPU
// target every core is already busy with backward, so a communication thread would only
// take cycles from it. The bucket layout is fixed at construction, which keeps the
// communication pattern identical on every rank.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

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
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    int64_t numel = 0;
    at::Tensor flat;
  };
  std::vector<at::Tensor> params_;
  std::vector<Bucket> buckets_;
};

}  // namespace mrcnn::engine::dist
