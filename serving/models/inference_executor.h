#pragma once
// The only threads that touch the model: `workers` threads, each with its own predictor
// instance (predictors are not thread-safe). Requests wait in one bounded queue; a free
// worker takes the oldest one and keeps collecting until the batch holds max_batch_images
// images (or its fair share of the queue, when other workers are free too) or max_wait has
// passed since that oldest request arrived, then runs one Predict over the whole batch (the
// real win on a GPU) with the loosest options of its requests and filters each request's
// share down to its own options (exact, see predictor.h). A tiled request (tile_size > 0)
// batches only with requests of equal options, and its own tiles are batched inside the
// model call (trainer/model/inference/inference.h).
//
// Several workers are for CPUs: one torch forward with N intra-op threads synchronises its
// threads at every op (thousands per image) and scales poorly, worst when the cores are
// shared; W single-threaded workers keep every core on useful work (bench/RESULTS.md).
//
// With a CoreShare (the model on a CPU), the workers report there when they take work and when
// they go back to waiting, so that a lone request's forward can use the idle workers' cores.
//
// A predictor that Overlaps() (the model on a GPU) keeps two batches in flight: its worker
// runs Start (the forward; the outputs' copies to the host queued) and hands the batch to a
// thread of its own that runs Finish (waits for the copies, writes the masks' RLE, filters
// and answers each request), while the worker collects and starts the next batch. Deadlines,
// the queue bound and Stop's drain are the same either way.
//
// Loading and warm-up happen on the worker threads too, so the HTTP side is listening and
// answering /ping with 503 while a large model loads; ready once every worker has loaded.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "serving/metrics/server_metrics.h"
#include "serving/models/core_share.h"
#include "serving/models/predictor.h"

namespace mrcnn::serving {

struct BatchingPolicy {
  int max_batch_images = 4;
  std::chrono::microseconds max_wait{std::chrono::milliseconds(5)};
  size_t queue_capacity = 64;  // requests waiting (not yet running)
  int workers = 1;             // model instances running batches concurrently
};

struct InferenceOutcome {
  std::vector<ImageDetections> results;  // one per image of the job, already filtered
  int batch_images = 0;                  // images in the Predict call that served the job
  enum class Status { kOk, kFailed, kDeadlineExceeded, kStopped } status = Status::kOk;
  std::string error;  // for kFailed
};

struct InferenceJob {
  std::vector<RgbImage> images;
  PredictOptions options;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Called exactly once, on the worker thread (or in Stop()): must only hand off.
  std::function<void(InferenceOutcome&&)> done;
};

class InferenceExecutor {
 public:
  // Calls loader once on each worker thread (concurrently) to load and warm up that
  // worker's predictor. on_loaded is called once, on a worker thread: with nullptr when
  // every worker has loaded, or with the first exception that made loading fail.
  // core_share, when given, must outlive the executor; so must metrics, which is told the
  // queue's depth, each request's wait in it and each batch's size and model time.
  using Loader = std::function<std::unique_ptr<Predictor>()>;
  InferenceExecutor(Loader loader, BatchingPolicy policy,
                    std::function<void(std::exception_ptr)> on_loaded,
                    CoreShare* core_share = nullptr, ServerMetrics* metrics = nullptr);
  ~InferenceExecutor();
  InferenceExecutor(const InferenceExecutor&) = delete;
  InferenceExecutor& operator=(const InferenceExecutor&) = delete;

  enum class SubmitResult { kAccepted, kNotReady, kQueueFull, kStopped };
  // Never blocks. The job's callback is only called when the result is kAccepted.
  SubmitResult TrySubmit(InferenceJob job);

  bool Ready() const;
  // What the loaded predictors answer (the first worker's; every worker loads the same
  // model); nullopt until a worker has loaded.
  std::optional<PredictorOutputs> Outputs() const;
  size_t QueueDepth() const;
  // Finishes the batch that is running, fails the queued jobs with kStopped, joins.
  void Stop();

 private:
  struct Queued {
    InferenceJob job;
    std::chrono::steady_clock::time_point arrived;
  };
  // A batch between Start and Finish: its requests, which of them are still live (not past
  // their deadline when it started), and the predictor's started parts.
  struct StartedWork {
    std::vector<Queued> batch;
    std::vector<size_t> live;
    std::vector<std::unique_ptr<StartedBatch>> parts;
    int images = 0;
    std::string error;  // a Start failed: every live request fails with it
    std::chrono::steady_clock::time_point model_start;
  };
  void Run();
  std::vector<Queued> CollectBatch(std::unique_lock<std::mutex>& lock);
  StartedWork StartBatch(Predictor& predictor, std::vector<Queued> batch);
  void FinishBatch(StartedWork& work);
  // Whether requests with these options may run in one Predict call.
  static bool ShareBatch(const PredictOptions& a, const PredictOptions& b);

  const BatchingPolicy policy_;
  Loader loader_;
  std::function<void(std::exception_ptr)> on_loaded_;
  CoreShare* core_share_;
  ServerMetrics* metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  int loaded_ = 0;  // workers whose predictor is loaded
  std::optional<PredictorOutputs> outputs_;
  bool load_failed_ = false;
  int idle_workers_ = 0;  // waiting for work: they share a burst of requests with the collector
  bool ready_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mrcnn::serving
