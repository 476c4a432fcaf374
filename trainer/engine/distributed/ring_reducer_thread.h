#pragma once
// The CPU form of AsyncGradientReducer: bucket sums over the TCP ring run on a
// communication thread, in launch order, while backward goes on computing on the training
// thread. Launch only queues the bucket. The ring is used by this thread alone between the
// first Launch and WaitAll's return; the training thread uses it (losses, barriers,
// broadcasts) only outside that window, so the ring needs no lock.
//
// A failed sum (a peer died or stalled: PeerError) skips the sums queued after it and is
// rethrown by WaitAll. Destroying the reducer while a sum is still running (backward threw)
// interrupts the ring so the thread, and the peers, fail at once instead of waiting for
// DIST.TIMEOUT_SECONDS.
#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "trainer/engine/distributed/overlapped_bucketer.h"
#include "trainer/engine/distributed/ring_allreduce.h"

namespace mrcnn::engine::dist {

class RingReducerThread : public AsyncGradientReducer {
 public:
  // `ring` must outlive this object.
  explicit RingReducerThread(RingCommunicator* ring);
  ~RingReducerThread() override;
  RingReducerThread(const RingReducerThread&) = delete;
  RingReducerThread& operator=(const RingReducerThread&) = delete;

  void Launch(at::Tensor& flat) override;
  void WaitAll() override;

 private:
  void Run();

  RingCommunicator* ring_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<std::pair<float*, size_t>> queue_;
  bool running_ = false;  // the thread is inside a sum
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace mrcnn::engine::dist
