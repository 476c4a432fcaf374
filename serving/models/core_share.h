#pragma once
// How a CPU server's cores are split among its model workers, moment by moment. Each worker
// thread sizes its own forward's OpenMP team, so the split can follow the load: a lone request
// runs on every core, and W concurrent ones get cores / W each, the layout that wins under
// load (one wide forward wastes cores at its per-op barriers; bench/RESULTS.md, serving).
// The executor counts the busy workers here; the model reads the share before every op (see
// model_predictor.cpp), so a wide forward narrows as soon as another request starts and widens
// again when it is left alone.
#include <atomic>

namespace mrcnn::serving {

// Intra-op threads for each of `busy` workers (clamped to [1, workers]) on `cores` cores:
// cores / busy, at least 1.
int IntraOpThreads(int cores, int workers, int busy);

// The CPUs this process may run on: its affinity mask (taskset, docker --cpuset-cpus), which
// std::thread::hardware_concurrency ignores. At least 1.
int UsableCores();

class CoreShare {
 public:
  CoreShare(int cores, int workers) : cores_(cores), workers_(workers) {}
  CoreShare(const CoreShare&) = delete;
  CoreShare& operator=(const CoreShare&) = delete;

  // A worker took work / went back to waiting for it. Called by the executor.
  void WorkerBusy() { busy_.fetch_add(1, std::memory_order_relaxed); }
  void WorkerIdle() { busy_.fetch_sub(1, std::memory_order_relaxed); }

  // The share of each busy worker now. One atomic load: cheap enough to call before every op.
  int ThreadsNow() const {
    return IntraOpThreads(cores_, workers_, busy_.load(std::memory_order_relaxed));
  }
  int BusyWorkers() const { return busy_.load(std::memory_order_relaxed); }

 private:
  const int cores_;
  const int workers_;
  std::atomic<int> busy_{0};
};

}  // namespace mrcnn::serving
