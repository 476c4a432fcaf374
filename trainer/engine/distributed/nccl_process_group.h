#pragma once
// The GPU gradient sums through c10d::ProcessGroupNCCL (libtorch_cuda), the engine PyTorch
// DDP runs on, one GPU per process:
//  - its communicator is created at construction (a collective of all ranks), the NCCL
//    unique id handed out through the rendezvous store (under the prefix "mrcnn/nccl/");
//  - each sum runs on the group's own NCCL stream, ordered after the caller's current
//    stream by an event and before the caller's later work by another (no host sync);
//  - its watchdog thread: a collective that does not complete within `timeout`
//    (DIST.TIMEOUT_SECONDS) because a peer died or stalled aborts the communicator and ends
//    this process with the collective and this rank named in the log
//    (TORCH_NCCL_ASYNC_ERROR_HANDLING, c10d's default: tear the process down), instead of
//    waiting in the GPU kernel until the job's maximum runtime.
//
// One object serves both schedules: SumInPlace (after backward) and Launch/WaitAll
// (overlapped with backward, from the autograd engine's thread).
//
// Compiled only with NCCL (MRCNN_WITH_NCCL): in CI and on the CPU development machine it is
// compiled, not run. It cannot run on a one-GPU machine either: NCCL refuses two ranks on
// one device. Header is Torch-light and CUDA-free.
#include <c10/core/Device.h>

#include <chrono>
#include <memory>

#include "trainer/engine/distributed/gradient_bucketer.h"
#include "trainer/engine/distributed/kv_store.h"
#include "trainer/engine/distributed/overlapped_bucketer.h"

namespace mrcnn::engine::dist {

class NcclProcessGroupReducer : public GradientReducer, public AsyncGradientReducer {};

struct NcclProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  c10::DeviceIndex device = 0;  // this rank's CUDA device
  // Each collective's limit, enforced by the group's watchdog.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // The overlapped schedule's sums compete with backward's kernels: a high-priority
  // stream lets them start as soon as a bucket is ready.
  bool high_priority_stream = false;
};

// Collective over all ranks. `store` must be one Rendezvous returned (its c10d store is
// what the group uses). Throws std::runtime_error naming NCCL's reason when the
// communicator cannot be created.
std::unique_ptr<NcclProcessGroupReducer> CreateNcclProcessGroupReducer(
    KeyValueStore& store, const NcclProcessGroupOptions& options);

}  // namespace mrcnn::engine::dist
