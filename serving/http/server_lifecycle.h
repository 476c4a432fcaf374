#pragma once
// What the HTTP side and the routes share about the server's life: whether it is draining
// (set once, by SIGTERM or HttpServer::BeginDrain; /ping answers 503 from then on), and the
// requests admitted and not yet finished (the drain waits for them; at most max_inflight
// at once, beyond that a route answers 503). Thread-safe.
#include <atomic>
#include <cstddef>
#include <memory>

namespace mrcnn::serving {

class ServerLifecycle {
 public:
  explicit ServerLifecycle(size_t max_inflight) : max_inflight_(max_inflight) {}

  bool Draining() const { return draining_.load(); }
  // True for the call that started the drain.
  bool StartDraining() { return !draining_.exchange(true); }

  // Holds one admission until destroyed (shared by every stage of a request).
  class Admission {
   public:
    explicit Admission(std::atomic<size_t>& counter) : counter_(counter) {}
    ~Admission() { counter_.fetch_sub(1); }
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

   private:
    std::atomic<size_t>& counter_;
  };
  // nullptr when max_inflight requests are already admitted.
  std::shared_ptr<Admission> TryAdmit() {
    if (inflight_.fetch_add(1) >= max_inflight_) {
      inflight_.fetch_sub(1);
      return nullptr;
    }
    return std::make_shared<Admission>(inflight_);
  }
  size_t InFlight() const { return inflight_.load(); }
  size_t max_inflight() const { return max_inflight_; }

 private:
  const size_t max_inflight_;
  std::atomic<bool> draining_{false};
  std::atomic<size_t> inflight_{0};
};

}  // namespace mrcnn::serving
