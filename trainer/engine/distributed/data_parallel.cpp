#include "trainer/engine/distributed/data_parallel.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdlib>
#include <stdexcept>

#include "trainer/engine/distributed/gradient_bucketer.h"
#include "trainer/engine/distributed/overlapped_bucketer.h"
#include "trainer/engine/distributed/rendezvous.h"
#include "trainer/engine/distributed/ring_reducer_thread.h"
#include "trainer/engine/distributed/tcp_link.h"
#ifdef MRCNN_WITH_NCCL
#include "trainer/engine/distributed/nccl_process_group.h"
#endif

namespace mrcnn::engine::dist {
namespace {

// CPU gradients: summed in place over the TCP ring.
class RingReducer : public GradientReducer {
 public:
  explicit RingReducer(RingCommunicator* ring) : ring_(ring) {}
  void SumInPlace(at::Tensor& flat) override {
    ring_->AllReduceSum(flat.data_ptr<float>(), static_cast<size_t>(flat.numel()));
  }

 private:
  RingCommunicator* ring_;
};

}  // namespace

DataParallel::DataParallel(const DataParallelOptions& options, const at::Device& device)
    : options_(options), device_(device) {
  if (!active())
    return;
  RendezvousOptions ro;
  ro.master_addr = options.master_addr;
  ro.master_port = options.master_port;
  ro.agent_store_prefix = options.agent_store_prefix;
  ro.rank = options.rank;
  ro.world_size = options.world_size;
  ro.timeout = options.timeout;
  store_ = Rendezvous(ro);
  RingOptions ring_options;
  ring_options.timeout = options.timeout;
  ring_options.description = options.description;
  ring_options.listen_address = options.listen_address.empty()
                                    ? LocalAddressToward(options.master_addr)
                                    : options.listen_address;
  ring_ = RingCommunicator::Connect(store_.get(), options.rank, options.world_size, ring_options);
  if (device.is_cuda()) {
#ifdef MRCNN_WITH_NCCL
    NcclProcessGroupOptions nccl;
    nccl.rank = options.rank;
    nccl.world_size = options.world_size;
    nccl.device = device.index();
    nccl.timeout = options.timeout;
    nccl.high_priority_stream = options.overlap_backward;
    auto reducer = CreateNcclProcessGroupReducer(*store_, nccl);
    if (options.overlap_backward)
      async_reducer_ = std::move(reducer);
    else
      reducer_ = std::move(reducer);
    backend_ = "nccl";
#else
    throw std::runtime_error(
        "MODEL.DEVICE is CUDA with WORLD_SIZE > 1 but this build has no NCCL: rebuild with "
        "MRCNN_CUDA=ON (NCCL from the CUDA toolkit or the wheel's nvidia/nccl), or train on cpu");
#endif
  } else {
    if (options.overlap_backward)
      async_reducer_ = std::make_unique<RingReducerThread>(ring_.get());
    else
      reducer_ = std::make_unique<RingReducer>(ring_.get());
    backend_ = "tcp-ring";
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::BroadcastFromRoot(const std::vector<at::Tensor>& tensors) {
  if (!active())
    return;
  c10::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) {
    // A contiguous CPU tensor is received in place; others go through a host copy.
    at::Tensor host = t.detach().to(at::kCPU).contiguous();
    ring_->Broadcast(host.data_ptr(), host.nbytes(), 0);
    if (options_.rank != 0 && host.data_ptr() != t.data_ptr())
      t.detach().copy_(host);
  }
}

void DataParallel::BroadcastFromRoot(std::vector<int64_t>& values) {
  if (active())
    ring_->Broadcast(values.data(), values.size() * sizeof(int64_t), 0);
}

OverlappedGradientBucketer& DataParallel::Overlapped(const std::vector<at::Tensor>& params) {
  // Created at the first call, before the first backward that must communicate: the hooks
  // go on the accumulators that backward will run.
  if (!overlapped_) {
    overlapped_ = std::make_unique<OverlappedGradientBucketer>(params, options_.bucket_bytes,
                                                               *async_reducer_, options_.world_size,
                                                               options_.bucket_trace_path);
  }
  return *overlapped_;
}

void DataParallel::ExpectFinalBackward(const std::vector<at::Tensor>& params) {
  if (!overlaps_backward())
    return;
  OverlappedGradientBucketer& overlapped = Overlapped(params);
  if (options_.overlap_every_other_iteration && final_backwards_++ % 2 == 1)
    return;
  overlapped.ArmForFinalBackward();
}

void DataParallel::AverageGradients(const std::vector<at::Tensor>& params) {
  if (!active())
    return;
  if (overlaps_backward()) {
    Overlapped(params).FinishAndAverage();
    return;
  }
  if (!bucketer_)
    bucketer_ = std::make_unique<GradientBucketer>(params, options_.bucket_bytes);
  bucketer_->AllReduceMean(*reducer_, options_.world_size);
}

void DataParallel::SumInPlace(std::vector<double>& values) {
  if (active())
    ring_->AllReduceSum(values.data(), values.size());
}

void DataParallel::Barrier() {
  if (active())
    ring_->Barrier(options_.rank == 0 ? options_.timeout : options_.barrier_timeout);
}

}  // namespace mrcnn::engine::dist
