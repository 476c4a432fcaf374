#pragma once
// Gradient averaging overlapped with backward (DIST.OVERLAP_BACKWARD), as PyTorch DDP's
// reducer does it: a post hook on each parameter's gradient accumulator (the autograd node
// that adds the incoming gradient into .grad) reports the parameter ready once its .grad
// is final, which includes earlier micro-batches' accumulated gradients (a tensor hook
// would see only the incoming gradient). Its gradient is copied into its bucket's buffer
// at once, and each bucket's sum starts as soon as it is complete and every bucket before
// it has started (bucket_readiness.h), so all ranks issue the same collectives in the same
// order.
//
// Only the iteration's last backward communicates (ArmForFinalBackward before it); the
// accumulating micro-batches' backwards run the hooks, which return at once. After that
// backward, FinishAndAverage packs the parameters it gave no gradient (.grad from an
// earlier micro-batch, or zeros), launches the buckets still waiting, waits for all and
// writes the means into .grad. The bucket layout is gradient_buckets.h's, the one the
// post-backward path uses, so both give bit-identical gradients.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/distributed/bucket_readiness.h"
#include "trainer/engine/distributed/gradient_buckets.h"

namespace torch::autograd {
struct Node;
}

namespace mrcnn::engine::dist {

// Starts bucket sums without waiting for them: the TCP ring on a communication thread
// (ring_reducer_thread.h) or ProcessGroupNCCL's stream (nccl_process_group.h).
class AsyncGradientReducer {
 public:
  virtual ~AsyncGradientReducer() = default;
  // Starts the in-place sum over the ranks of `flat` (contiguous float32 on this rank's
  // device, written on the calling thread's current stream). Calls come in the same order
  // on every rank, from the autograd engine's thread during backward or the training
  // thread after it, never two at once. `flat` must stay alive until WaitAll returns.
  virtual void Launch(at::Tensor& flat) = 0;
  // Returns once every launched sum is complete (CPU) or ordered before further work on
  // the caller's current stream (CUDA). Rethrows the first failed sum's error.
  virtual void WaitAll() = 0;
};

class OverlappedGradientBucketer {
 public:
  // params: the trainable float32 parameters, in the same order on every rank; hooks go on
  // those that require a gradient. `reducer` must outlive this object. When `trace_path`
  // is not empty, the first iteration's readiness marks and launches are written there
  // (bucket_readiness.h's FormatBucketTrace).
  OverlappedGradientBucketer(std::vector<at::Tensor> params, size_t bucket_bytes,
                             AsyncGradientReducer& reducer, int world_size,
                             std::string trace_path = "");
  // Removes the hooks.
  ~OverlappedGradientBucketer();
  OverlappedGradientBucketer(const OverlappedGradientBucketer&) = delete;
  OverlappedGradientBucketer& operator=(const OverlappedGradientBucketer&) = delete;

  // The next backward is the iteration's last: its hooks launch buckets. Throws
  // std::logic_error when the previous armed iteration was not finished.
  void ArmForFinalBackward();
  // After the last backward (armed or not: unarmed, every bucket launches here, which is
  // the post-backward path): replaces each parameter's gradient by its mean over the ranks.
  void FinishAndAverage();
  size_t num_buckets() const { return buckets_.size(); }

 private:
  void OnGradientReady(size_t param);
  void Launch(LaunchRange range);

  std::vector<at::Tensor> params_;
  std::vector<GradientBucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;  // per parameter
  BucketReadiness readiness_;
  AsyncGradientReducer& reducer_;
  int world_size_;
  std::string trace_path_;
  int64_t iterations_ = 0;
  std::atomic<bool> armed_{false};
  // Owned here: a parameter holds its accumulator only weakly, and a new one (without our
  // hook) would be made once the graphs referencing the old one are gone.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace mrcnn::engine::dist
