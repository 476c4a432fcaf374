#include "trainer/engine/distributed/nccl_process_group.h"

#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <utility>
#include <vector>

#include "trainer/engine/distributed/rendezvous_c10d.h"

namespace mrcnn::engine::dist {
namespace {

class NcclReducer : public NcclProcessGroupReducer {
 public:
  NcclReducer(c10::intrusive_ptr<c10d::ProcessGroupNCCL> group, c10::DeviceIndex device)
      : group_(std::move(group)), device_(device) {}

  ~NcclReducer() override {
    // A normal end drains and destroys the communicator; while an error unwinds (a peer
    // lost, found by the TCP ring or a timeout) a collective may never finish, so the
    // communicator is aborted instead of waited for.
    try {
      if (std::uncaught_exceptions() > 0)
        group_->abort();
      else
        group_->shutdown();
    } catch (const std::exception& e) {
      std::cerr << "[dist] closing the NCCL process group: " << e.what() << "\n";
    }
  }

  void SumInPlace(at::Tensor& flat) override {
    Check(flat);
    Start(flat)->wait();
  }

  void Launch(at::Tensor& flat) override {
    Check(flat);
    pending_.push_back(Start(flat));
  }

  void WaitAll() override {
    // wait() makes the caller's current stream wait for each sum (no host block);
    // a failed or aborted sum rethrows its error here.
    std::vector<c10::intrusive_ptr<c10d::Work>> pending = std::move(pending_);
    pending_.clear();
    for (auto& work : pending)
      work->wait();
  }

 private:
  void Check(const at::Tensor& flat) const {
    if (!flat.is_cuda() || flat.device().index() != device_ || !flat.is_contiguous() ||
        flat.scalar_type() != at::kFloat) {
      throw std::invalid_argument(
          "NCCL gradient sum: expects a contiguous float32 tensor on cuda:" +
          std::to_string(device_) + ", got " + flat.toString() + " on " + flat.device().str());
    }
  }

  c10::intrusive_ptr<c10d::Work> Start(at::Tensor& flat) {
    std::vector<at::Tensor> tensors{flat};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
    return group_->allreduce(tensors, options);
  }

  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;
  c10::DeviceIndex device_;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;
};

}  // namespace

std::unique_ptr<NcclProcessGroupReducer> CreateNcclProcessGroupReducer(
    KeyValueStore& store, const NcclProcessGroupOptions& options) {
  auto group_options = c10d::ProcessGroupNCCL::Options::create(options.high_priority_stream);
  group_options->timeout = options.timeout;
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("mrcnn/nccl", C10dStoreOf(store));
  try {
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, options.rank,
                                                             options.world_size, group_options);
    // The communicator now, while every rank is in the rendezvous, rather than at the
    // first gradient sum in the middle of a step.
    group->eagerConnectSingleDevice(at::Device(at::kCUDA, options.device));
    return std::make_unique<NcclReducer>(std::move(group), options.device);
  } catch (const std::exception& e) {
    throw std::runtime_error(
        "creating the NCCL process group (rank " + std::to_string(options.rank) + " of " +
        std::to_string(options.world_size) + ", cuda:" + std::to_string(options.device) +
        ") failed: " + e.what() + " (rerun with NCCL_DEBUG=INFO for NCCL's view)");
  }
}

}  // namespace mrcnn::engine::dist
