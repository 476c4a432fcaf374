#pragma once
// What the training loop needs from the other ranks: rendezvous (rendezvous.h), the TCP
// ring (ring_allreduce.h) for broadcasts, small all-reduces (losses, the stop vote) and
// barriers, and the gradient average (gradient_bucketer.h) over the ring on CPU or NCCL
// on CUDA (nccl_allreduce.h, when compiled in). With world_size 1 every call is a no-op
// and nothing is opened.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/distributed/kv_store.h"
#include "trainer/engine/distributed/ring_allreduce.h"

namespace mrcnn::engine::dist {

class GradientBucketer;
class GradientReducer;

struct DataParallelOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Rendezvous, connects, and each collective's wait for a peer's progress.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Barriers that wait for rank 0's solo work (evaluation, checkpoint, model dir): the
  // other ranks' wait. Rank 0 arrives last, so it waits only `timeout` for them: a rank
  // that died or stalled while rank 0 worked is found within that time.
  std::chrono::milliseconds barrier_timeout{std::chrono::hours(2)};
  size_t bucket_bytes = 25u << 20;
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

  // Overwrites every tensor (any dtype or device) with rank 0's values, in list order.
  void BroadcastFromRoot(const std::vector<at::Tensor>& tensors);
  void BroadcastFromRoot(std::vector<int64_t>& values);
  // Averages the parameters' gradients over the ranks (params in the same order on all).
  void AverageGradients(const std::vector<at::Tensor>& params);
  // Sum over the ranks, in place (deterministic, identical on every rank).
  void SumInPlace(std::vector<double>& values);
  // Waits until every rank got here: up to barrier_timeout, rank 0 up to timeout.
  void Barrier();

 private:
  DataParallelOptions options_;
  at::Device device_;
  std::string backend_ = "none";
  std::unique_ptr<KeyValueStore> store_;
  std::unique_ptr<RingCommunicator> ring_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<GradientBucketer> bucketer_;
};

}  // namespace mrcnn::engine::dist
