#include "trainer/engine/distributed/nccl_stream_reducer.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>
#include <utility>

namespace mrcnn::engine::dist {
namespace {

class NcclStreamReducer : public AsyncGradientReducer {
 public:
  NcclStreamReducer(std::unique_ptr<NcclCommunicator> comm, c10::DeviceIndex device)
      : comm_(std::move(comm)),
        device_(device),
        side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device)) {}

  void Launch(at::Tensor& flat) override {
    if (!flat.is_cuda() || flat.device().index() != device_ || !flat.is_contiguous())
      throw std::invalid_argument("NcclStreamReducer: expects a contiguous tensor on its device");
    c10::cuda::CUDAGuard guard(device_);
    // The copies into `flat` were enqueued on this thread's current stream (during
    // backward, the autograd engine sets it to the stream of the gradient's producer).
    // One event serves every launch: cudaStreamWaitEvent captures its latest record.
    written_.record(c10::cuda::getCurrentCUDAStream(device_));
    written_.block(side_);
    // The caching allocator must not hand the buffer to another stream while the side
    // stream may still read it.
    c10::cuda::CUDACachingAllocator::recordStream(flat.storage().data_ptr(), side_);
    comm_->AllReduceSum(flat.data_ptr<float>(), static_cast<size_t>(flat.numel()), side_.stream());
  }

  void WaitAll() override {
    c10::cuda::CUDAGuard guard(device_);
    reduced_.record(side_);
    reduced_.block(c10::cuda::getCurrentCUDAStream(device_));
  }

 private:
  std::unique_ptr<NcclCommunicator> comm_;
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
  c10::cuda::CUDAEvent written_, reduced_;
};

}  // namespace

std::unique_ptr<AsyncGradientReducer> MakeNcclStreamReducer(std::unique_ptr<NcclCommunicator> comm,
                                                            c10::DeviceIndex device) {
  return std::make_unique<NcclStreamReducer>(std::move(comm), device);
}

}  // namespace mrcnn::engine::dist
