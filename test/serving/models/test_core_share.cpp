#include <pthread.h>
#include <sched.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "serving/models/core_share.h"
#include "serving/models/inference_executor.h"

using namespace mrcnn::serving;
using namespace std::chrono_literals;

TEST_CASE("a busy worker's share: every core alone, cores / busy under load",
          "[serving][core_share]") {
  // An ml.c6i.4xlarge: 16 vCPUs, 4 workers.
  CHECK(IntraOpThreads(16, 4, 1) == 16);
  CHECK(IntraOpThreads(16, 4, 2) == 8);
  CHECK(IntraOpThreads(16, 4, 3) == 5);
  CHECK(IntraOpThreads(16, 4, 4) == 4);  // full load: the fixed layout of before
  // This VM: 2 cores, 2 workers.
  CHECK(IntraOpThreads(2, 2, 1) == 2);
  CHECK(IntraOpThreads(2, 2, 2) == 1);
  // More workers than cores (--workers 4 on 2 cores): never below one thread.
  CHECK(IntraOpThreads(2, 4, 3) == 1);
  CHECK(IntraOpThreads(1, 2, 2) == 1);
  // No busy worker (a forward asks before it is counted) reads as one; more busy workers than
  // there are cannot happen and read as all of them.
  CHECK(IntraOpThreads(16, 4, 0) == 16);
  CHECK(IntraOpThreads(16, 4, 9) == 4);
}

TEST_CASE("usable cores come from the affinity mask (taskset), not the machine",
          "[serving][core_share]") {
  CHECK(UsableCores() >= 1);
  int pinned = 0;
  int rc = -1;
  std::thread probe([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    rc = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    pinned = UsableCores();
  });
  probe.join();
  REQUIRE(rc == 0);
  CHECK(pinned == 1);
}

namespace {

// Records the share it would run with once `expected` predictions are in flight together, and
// returns once all of them have recorded theirs.
class SharePredictor final : public Predictor {
 public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable arrived;
    int in_flight = 0;
    int expected = 1;
    std::vector<int> threads;
    bool all_met = true;
  };
  SharePredictor(Shared& shared, const CoreShare& share) : shared_(shared), share_(share) {}
  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions&) override {
    std::unique_lock lock(shared_.mutex);
    ++shared_.in_flight;
    shared_.arrived.notify_all();
    if (!shared_.arrived.wait_for(lock, 20s,
                                  [&] { return shared_.in_flight >= shared_.expected; })) {
      shared_.all_met = false;
    }
    shared_.threads.push_back(share_.ThreadsNow());
    shared_.arrived.notify_all();
    // Neither returns (and goes idle) before the other has read its share.
    if (!shared_.arrived.wait_for(lock, 20s, [&] {
          return static_cast<int>(shared_.threads.size()) >= shared_.expected;
        })) {
      shared_.all_met = false;
    }
    std::vector<ImageDetections> out;
    for (const auto& image : images) {
      out.push_back(ImageDetections{image.height, image.width, {}});
    }
    return out;
  }
  std::string Describe() const override { return "share"; }

 private:
  Shared& shared_;
  const CoreShare& share_;
};

std::future<InferenceOutcome> SubmitOne(InferenceExecutor& executor) {
  auto promise = std::make_shared<std::promise<InferenceOutcome>>();
  auto future = promise->get_future();
  InferenceJob job;
  job.images.push_back(RgbImage{4, 4, std::vector<uint8_t>(4 * 4 * 3, 0)});
  job.done = [promise](InferenceOutcome&& outcome) { promise->set_value(std::move(outcome)); };
  REQUIRE(executor.TrySubmit(std::move(job)) == InferenceExecutor::SubmitResult::kAccepted);
  return future;
}

// The workers count themselves idle just after answering: wait for that, bounded.
bool WaitIdle(const CoreShare& share) {
  for (int i = 0; i < 500 && share.BusyWorkers() != 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  return share.BusyWorkers() == 0;
}

}  // namespace

TEST_CASE("the executor counts busy workers: a lone request gets every core, two share them",
          "[serving][core_share][executor]") {
  CoreShare share(16, 4);
  SharePredictor::Shared shared;
  std::atomic<int> busy_while_loading{0};
  std::promise<void> loaded;
  InferenceExecutor executor(
      [&]() {
        busy_while_loading = std::max(busy_while_loading.load(), share.BusyWorkers());
        return std::make_unique<SharePredictor>(shared, share);
      },
      BatchingPolicy{1, 5ms, 64, 4},
      [&](std::exception_ptr error) {
        CHECK_FALSE(error);
        loaded.set_value();
      },
      &share);
  loaded.get_future().get();
  CHECK(busy_while_loading.load() >= 1);  // a loading worker counts: warm-ups share the cores
  REQUIRE(WaitIdle(share));

  CHECK(SubmitOne(executor).get().status == InferenceOutcome::Status::kOk);
  REQUIRE(WaitIdle(share));
  {
    std::lock_guard lock(shared.mutex);
    CHECK(shared.threads == std::vector<int>{16});
    shared.threads.clear();
    shared.in_flight = 0;
    shared.expected = 2;
  }

  // Each of the two waits until the other is in flight, then reads its share.
  auto first = SubmitOne(executor);
  auto second = SubmitOne(executor);
  CHECK(first.get().status == InferenceOutcome::Status::kOk);
  CHECK(second.get().status == InferenceOutcome::Status::kOk);
  REQUIRE(WaitIdle(share));
  {
    std::lock_guard lock(shared.mutex);
    CHECK(shared.all_met);
    CHECK(shared.threads == std::vector<int>{8, 8});
    shared.threads.clear();
    shared.in_flight = 0;
    shared.expected = 1;
  }

  CHECK(SubmitOne(executor).get().status == InferenceOutcome::Status::kOk);
  std::lock_guard lock(shared.mutex);
  CHECK(shared.threads == std::vector<int>{16});  // alone again: wide again
}
