#include "trainer/engine/distributed/ring_reducer_thread.h"

#include <stdexcept>

namespace mrcnn::engine::dist {

RingReducerThread::RingReducerThread(RingCommunicator* ring)
    : ring_(ring), thread_([this] { Run(); }) {}

RingReducerThread::~RingReducerThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
    if (running_)
      ring_->Interrupt();
  }
  work_.notify_all();
  thread_.join();
}

void RingReducerThread::Launch(at::Tensor& flat) {
  if (!flat.is_contiguous() || flat.scalar_type() != at::kFloat || !flat.is_cpu())
    throw std::invalid_argument("RingReducerThread: expects a contiguous float32 CPU tensor");
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(flat.data_ptr<float>(), static_cast<size_t>(flat.numel()));
  }
  work_.notify_one();
}

void RingReducerThread::WaitAll() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return queue_.empty() && !running_; });
  if (error_) {
    // The ring is broken (a peer failed): every later WaitAll reports the same error.
    std::rethrow_exception(error_);
  }
}

void RingReducerThread::Run() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_)
      return;
    const auto [data, count] = queue_.front();
    queue_.pop_front();
    if (!error_) {
      running_ = true;
      lock.unlock();
      std::exception_ptr failed;
      try {
        ring_->AllReduceSum(data, count);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      running_ = false;
      if (failed && !error_)
        error_ = failed;
    }
    if (queue_.empty())
      done_.notify_all();
  }
}

}  // namespace mrcnn::engine::dist
