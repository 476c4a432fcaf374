#pragma once
// A thread that runs `finish` on each piece of work handed to it, in the order handed, while
// the thread that handed it goes on with the next piece: the inference executor's second
// batch in flight (one batch finishing on the host while the next one's forward runs).
// Hand returns once this thread has taken the work, so at most two pieces are in flight: the
// one being finished here and the one its single caller is preparing. The destructor finishes
// what was handed, then joins. One thread may call Hand.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace mrcnn::serving {

template <typename Work>
class HandoffThread {
 public:
  explicit HandoffThread(std::function<void(Work&)> finish)
      : finish_(std::move(finish)), thread_([this] { Run(); }) {}

  ~HandoffThread() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    handed_.notify_one();
    thread_.join();
  }
  HandoffThread(const HandoffThread&) = delete;
  HandoffThread& operator=(const HandoffThread&) = delete;

  // Blocks while the previous piece is still being finished.
  void Hand(Work work) {
    std::unique_lock lock(mutex_);
    waiting_.emplace(std::move(work));
    handed_.notify_one();
    taken_.wait(lock, [this] { return !waiting_.has_value(); });
  }

 private:
  void Run() {
    std::unique_lock lock(mutex_);
    while (true) {
      handed_.wait(lock, [this] { return waiting_.has_value() || closing_; });
      if (!waiting_.has_value()) {
        return;
      }
      Work work = std::move(*waiting_);
      waiting_.reset();
      lock.unlock();
      taken_.notify_one();
      finish_(work);
      lock.lock();
    }
  }

  std::function<void(Work&)> finish_;
  std::mutex mutex_;
  std::condition_variable handed_;
  std::condition_variable taken_;
  std::optional<Work> waiting_;
  bool closing_ = false;
  std::thread thread_;  // last: starts once the members it reads exist
};

}  // namespace mrcnn::serving
