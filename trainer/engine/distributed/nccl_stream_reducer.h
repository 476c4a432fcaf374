#pragma once
// The GPU form of AsyncGradientReducer: each bucket's ncclAllReduce is enqueued on a side
// stream that first waits (an event, not a host sync) for the stream that wrote the bucket,
// so the all-reduce runs while the training stream computes the rest of backward; WaitAll
// makes the caller's current stream wait for the side stream. The host never blocks.
//
// Compiled only with NCCL (MRCNN_WITH_NCCL); compiled in CI, not run without a GPU.
// Header is Torch-light and CUDA-free.
#include <c10/core/Device.h>

#include <memory>

#include "trainer/engine/distributed/nccl_allreduce.h"
#include "trainer/engine/distributed/overlapped_bucketer.h"

namespace mrcnn::engine::dist {

// `device`: this rank's CUDA device, where the buckets live.
std::unique_ptr<AsyncGradientReducer> MakeNcclStreamReducer(std::unique_ptr<NcclCommunicator> comm,
                                                            c10::DeviceIndex device);

}  // namespace mrcnn::engine::dist
