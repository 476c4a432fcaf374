#pragma once
// What the training loop needs from the other ranks: rendezvous (rendezvous.h), the TCP
// ring (ring_allreduce.h) for broadcasts, small all-reduces (losses, the stop vote) and
// barriers, and the gradient average over the ring on CPU or c10d's ProcessGroupNCCL on
// CUDA (nccl_process_group.h, when compiled in): after backward (gradient_bucketer.h) or, with
// overlap_backward, during it (overlapped_bucketer.h: a communication thread on CPU, a side
// stream on CUDA). With world_size 1 every call is a no-op and nothing is opened.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/distributed/kv_store.h"
#include "trainer/engine/distributed/ring_allreduce.h"

namespace mrcnn::engine::dist {

class AsyncGradientReducer;
class GradientBucketer;
class GradientReducer;
class OverlappedGradientBucketer;

struct DataParallelOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Non-empty: the launcher's store (torchrun's agent) under this prefix; see RendezvousOptions.
  std::string agent_store_prefix;
  // Rendezvous, connects, and each collective's wait for a peer's progress.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Barriers that wait for rank 0's solo work (evaluation, checkpoint, model dir): the
  // other ranks' wait. Rank 0 arrives last, so it waits only `timeout` for them: a rank
  // that died or stalled while rank 0 worked is found within that time.
  std::chrono::milliseconds barrier_timeout{std::chrono::hours(2)};
  size_t bucket_bytes = 25u << 20;
  // Launch each bucket's all-reduce from gradient hooks during the iteration's last
  // backward (DIST.OVERLAP_BACKWARD) instead of after it.
  bool overlap_backward = false;
  // With overlap_backward: where to write the first iteration's bucket readiness and
  // launch order ("" = nowhere; MRCNN_BUCKET_TRACE_DIR sets it per rank).
  std::string bucket_trace_path;
  // With overlap_backward, for bench/engine/bench_overlap.py: arm the hooks only on every
  // other iteration (the first, third, ...), so the others run the post-backward schedule
  // (all buckets launched after backward) and the two interleave under the same load.
  bool overlap_every_other_iteration = false;
  // Address this rank's ring listener binds to and advertises; "" = the interface that
  // routes to MASTER_ADDR (127.0.0.1 when that is loopback).
  std::string listen_address;
  // "local rank 1 on algo-2": how the other ranks name this one in their errors.
  std::string description;
};

class DataParallel {
 public:
  // Collective: all ranks construct it together. `device` is where the gradients live;
  // on CUDA the gradient average uses NCCL when the build has it.
  DataParallel(const DataParallelOptions& options, const at::Device& device);
  ~DataParallel();

  bool active() const { return options_.world_size > 1; }
  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  // "none", "tcp-ring" or "nccl": what averages the gradients.
  const std::string& gradient_backend() const { return backend_; }
  bool overlaps_backward() const { return active() && options_.overlap_backward; }

  // Overwrites every tensor (any dtype or device) with rank 0's values, in list order.
  void BroadcastFromRoot(const std::vector<at::Tensor>& tensors);
  void BroadcastFromRoot(std::vector<int64_t>& values);
  // Call before the iteration's last backward (its only one without gradient
  // accumulation), with the parameters AverageGradients will get. With overlap_backward,
  // that backward's gradient hooks start each bucket's all-reduce once its gradients are
  // final; earlier backwards communicate nothing. No-op without overlap.
  void ExpectFinalBackward(const std::vector<at::Tensor>& params);
  // After the last backward: averages the parameters' gradients over the ranks (params in
  // the same order on all, the same list every call), finishing and waiting for what the
  // hooks launched. Parameters without a gradient count as zeros and get one.
  void AverageGradients(const std::vector<at::Tensor>& params);
  // Sum over the ranks, in place (deterministic, identical on every rank).
  void SumInPlace(std::vector<double>& values);
  // Waits until every rank got here: up to barrier_timeout, rank 0 up to timeout.
  void Barrier();

 private:
  OverlappedGradientBucketer& Overlapped(const std::vector<at::Tensor>& params);

  DataParallelOptions options_;
  at::Device device_;
  std::string backend_ = "none";
  std::unique_ptr<KeyValueStore> store_;
  std::unique_ptr<RingCommunicator> ring_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<GradientBucketer> bucketer_;
  // Declared after what they use: destroyed first (hooks removed, thread joined).
  std::unique_ptr<AsyncGradientReducer> async_reducer_;
  std::unique_ptr<OverlappedGradientBucketer> overlapped_;
  int64_t final_backwards_ = 0;
};

}  // namespace mrcnn::engine::dist
