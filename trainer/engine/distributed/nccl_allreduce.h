#pragma once
// The GPU gradient all-reduce: one NCCL communicator per process (one GPU each), the
// ncclUniqueId created by rank 0 and handed out through the rendezvous store, sums of
// float32 buffers enqueued on the caller's CUDA stream (so they order after the backward
// kernels that produced the gradients without a host sync).
//
// Compiled only when the build has CUDA (MRCNN_WITH_NCCL); it is compiled in CI and on the
// CPU development machine but has not been run there (no GPU). Known gap: a peer that
// dies mid-collective can leave NCCL kernels waiting; NCCL's own timeouts apply, we add
// no watchdog (the TCP ring used for the per-step stop/loss all-reduce does time out).
// Header is Torch- and CUDA-free.
#include <chrono>
#include <cstddef>
#include <memory>

#include "trainer/engine/distributed/kv_store.h"

namespace mrcnn::engine::dist {

class NcclCommunicator {
 public:
  // Collective over all ranks; `device` is this rank's CUDA device index.
  static std::unique_ptr<NcclCommunicator> Create(KeyValueStore* store, int rank, int world_size,
                                                  int device, std::chrono::milliseconds timeout);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // In-place sum of `count` float32 in device memory, enqueued on `cuda_stream`
  // (a cudaStream_t).
  void AllReduceSum(float* device_data, size_t count, void* cuda_stream);

 private:
  NcclCommunicator() = default;
  void* comm_ = nullptr;  // ncclComm_t
};

}  // namespace mrcnn::engine::dist
