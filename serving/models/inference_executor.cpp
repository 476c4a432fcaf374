#include "serving/models/inference_executor.h"

#include <algorithm>
#include <optional>

#include "serving/models/detection_filter.h"
#include "serving/models/handoff_thread.h"

namespace mrcnn::serving {

using Clock = std::chrono::steady_clock;

InferenceExecutor::InferenceExecutor(Loader loader, BatchingPolicy policy,
                                     std::function<void(std::exception_ptr)> on_loaded,
                                     CoreShare* core_share, ServerMetrics* metrics)
    : policy_(policy),
      loader_(std::move(loader)),
      on_loaded_(std::move(on_loaded)),
      core_share_(core_share),
      metrics_(metrics) {
  const int workers = std::max(policy_.workers, 1);
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this] { Run(); });
  }
}

InferenceExecutor::~InferenceExecutor() {
  Stop();
}

InferenceExecutor::SubmitResult InferenceExecutor::TrySubmit(InferenceJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      return SubmitResult::kStopped;
    }
    if (!ready_) {
      return SubmitResult::kNotReady;
    }
    if (queue_.size() >= policy_.queue_capacity) {
      return SubmitResult::kQueueFull;
    }
    queue_.push_back(Queued{std::move(job), Clock::now()});
    if (metrics_ != nullptr) {
      metrics_->AddQueued(1);
    }
  }
  wake_.notify_one();
  return SubmitResult::kAccepted;
}

bool InferenceExecutor::Ready() const {
  std::lock_guard lock(mutex_);
  return ready_ && !stopping_;
}

std::optional<PredictorOutputs> InferenceExecutor::Outputs() const {
  std::lock_guard lock(mutex_);
  return outputs_;
}

size_t InferenceExecutor::QueueDepth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void InferenceExecutor::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) {
      worker.join();
    }
  }
}

void InferenceExecutor::Run() {
  // Loading and warm-up keep a core busy too: the workers warming up together share the cores.
  bool busy = core_share_ != nullptr;
  if (busy) {
    core_share_->WorkerBusy();
  }
  std::unique_ptr<Predictor> predictor;
  try {
    predictor = loader_();
  } catch (...) {
    if (busy) {
      core_share_->WorkerIdle();
    }
    bool first_failure = false;
    {
      std::lock_guard lock(mutex_);
      first_failure = !load_failed_;
      load_failed_ = true;
    }
    if (first_failure) {
      on_loaded_(std::current_exception());
    }
    return;
  }
  bool all_loaded = false;
  {
    std::lock_guard lock(mutex_);
    ++loaded_;
    if (!outputs_) {
      outputs_ = predictor->Outputs();
    }
    // Idle from here on, in the same step that may make the executor ready: otherwise the
    // first requests could meet a worker that has not yet counted itself free and take
    // them all as one batch (the fair share below reads idle_workers_).
    ++idle_workers_;
    // policy_, not workers_: the constructor may still be filling workers_.
    all_loaded = loaded_ == std::max(policy_.workers, 1) && !load_failed_;
    ready_ = ready_ || all_loaded;
  }
  if (all_loaded) {
    on_loaded_(nullptr);
  }

  // Declared after the predictor: finishes what it was handed before the predictor goes.
  std::optional<HandoffThread<StartedWork>> finisher;
  if (predictor->Overlaps()) {
    finisher.emplace([this](StartedWork& work) { FinishBatch(work); });
  }
  std::unique_lock lock(mutex_);
  // Busy from taking work until about to sleep: a worker that goes straight on to the next
  // queued request never counts as idle, so a neighbour's share does not flicker wider.
  while (true) {
    if (busy && !stopping_ && queue_.empty()) {
      busy = false;
      core_share_->WorkerIdle();
    }
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_workers_;
    if (stopping_) {
      break;
    }
    if (core_share_ != nullptr && !busy) {
      busy = true;
      core_share_->WorkerBusy();
    }
    std::vector<Queued> batch = CollectBatch(lock);
    if (!queue_.empty()) {
      wake_.notify_all();  // what this worker left is for the idle ones
    }
    lock.unlock();
    StartedWork work = StartBatch(*predictor, std::move(batch));
    if (finisher.has_value()) {
      finisher->Hand(std::move(work));
    } else {
      FinishBatch(work);
    }
    lock.lock();
    ++idle_workers_;
  }
  lock.unlock();
  finisher.reset();  // the batch still finishing is answered before the queue is abandoned
  lock.lock();
  if (busy) {
    core_share_->WorkerIdle();
  }
  std::deque<Queued> abandoned;
  abandoned.swap(queue_);
  if (metrics_ != nullptr) {
    metrics_->AddQueued(-static_cast<int64_t>(abandoned.size()));
  }
  lock.unlock();
  for (Queued& queued : abandoned) {
    InferenceOutcome outcome;
    outcome.status = InferenceOutcome::Status::kStopped;
    queued.job.done(std::move(outcome));
  }
}

std::vector<InferenceExecutor::Queued> InferenceExecutor::CollectBatch(
    std::unique_lock<std::mutex>& lock) {
  std::vector<Queued> batch;
  int images = 0;
  const auto window_end = queue_.front().arrived + policy_.max_wait;
  while (true) {
    // With other workers free, take only this worker's share of what is queued and do not
    // wait for more: on a CPU two workers running one image each finish both sooner than
    // one running a batch of two while the other idles. With no other worker free (always
    // so with one worker) the batch fills up to max_batch_images within max_wait.
    const int max_images = std::max(policy_.max_batch_images, 1);
    int limit = max_images;
    if (idle_workers_ > 0) {
      int queued_images = images;
      for (const Queued& queued : queue_) {
        queued_images += static_cast<int>(queued.job.images.size());
      }
      limit = std::clamp((queued_images + idle_workers_) / (idle_workers_ + 1), 1, max_images);
    }
    while (!queue_.empty()) {
      const int next = static_cast<int>(queue_.front().job.images.size());
      if (!batch.empty() && (images + next > limit ||
                             !ShareBatch(batch.front().job.options, queue_.front().job.options))) {
        return batch;  // the next request starts the next batch
      }
      images += next;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      if (metrics_ != nullptr) {
        metrics_->AddQueued(-1);
      }
      if (images >= limit) {
        return batch;
      }
    }
    if (stopping_ || Clock::now() >= window_end) {
      return batch;
    }
    wake_.wait_until(lock, window_end, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      return batch;
    }
  }
}

bool InferenceExecutor::ShareBatch(const PredictOptions& a, const PredictOptions& b) {
  // Untiled requests run with the loosest options and are filtered down (exact); a tiled
  // request's merge does not commute with that filter, so it shares only equal options.
  return (a.tile_size == 0 && b.tile_size == 0) || a == b;
}

InferenceExecutor::StartedWork InferenceExecutor::StartBatch(Predictor& predictor,
                                                             std::vector<Queued> batch) {
  StartedWork work;
  work.batch = std::move(batch);
  // Requests past their deadline are answered without running them.
  const auto now = Clock::now();
  for (size_t i = 0; i < work.batch.size(); ++i) {
    Queued& queued = work.batch[i];
    if (metrics_ != nullptr) {
      metrics_->ObserveQueueWait(std::chrono::duration<double>(now - queued.arrived).count());
    }
    if (queued.job.deadline <= now) {
      InferenceOutcome outcome;
      outcome.status = InferenceOutcome::Status::kDeadlineExceeded;
      queued.job.done(std::move(outcome));
    } else {
      work.live.push_back(i);
    }
  }
  if (work.live.empty()) {
    return work;
  }
  PredictOptions loosest = work.batch[work.live.front()].job.options;
  std::vector<RgbImageView> views;
  for (size_t i : work.live) {
    const PredictOptions& options = work.batch[i].job.options;
    loosest.score_threshold = std::min(loosest.score_threshold, options.score_threshold);
    loosest.max_detections = std::max(loosest.max_detections, options.max_detections);
    loosest.masks = loosest.masks || options.masks;
    for (const RgbImage& image : work.batch[i].job.images) {
      views.push_back(RgbImageView{image.pixels.data(), image.height, image.width});
    }
  }
  work.images = static_cast<int>(views.size());
  work.model_start = Clock::now();
  // A single request larger than the batch limit runs alone, in parts of the limit.
  try {
    const size_t chunk = static_cast<size_t>(std::max(policy_.max_batch_images, 1));
    for (size_t begin = 0; begin < views.size(); begin += chunk) {
      const size_t count = std::min(chunk, views.size() - begin);
      work.parts.push_back(predictor.Start(std::span(views).subspan(begin, count), loosest));
    }
  } catch (const std::exception& e) {
    work.error = e.what();
  } catch (...) {
    work.error = "unknown exception from the predictor";
  }
  return work;
}

void InferenceExecutor::FinishBatch(StartedWork& work) {
  if (work.live.empty()) {
    return;
  }
  std::vector<ImageDetections> results;
  std::string& error = work.error;
  // Every part is finished, even after one failed: each holds the predictor's buffers.
  const size_t chunk = static_cast<size_t>(std::max(policy_.max_batch_images, 1));
  for (size_t p = 0; p < work.parts.size(); ++p) {
    const size_t expected = std::min(chunk, static_cast<size_t>(work.images) - p * chunk);
    try {
      auto part = work.parts[p]->Finish();
      if (error.empty() && part.size() != expected) {
        error = "the predictor returned " + std::to_string(part.size()) + " results for " +
                std::to_string(expected) + " images";
      }
      std::move(part.begin(), part.end(), std::back_inserter(results));
    } catch (const std::exception& e) {
      error = error.empty() ? e.what() : error;
    } catch (...) {
      error = error.empty() ? "unknown exception from the predictor" : error;
    }
  }
  work.parts.clear();
  if (metrics_ != nullptr) {
    metrics_->ObserveBatch(work.images,
                           std::chrono::duration<double>(Clock::now() - work.model_start).count());
  }
  size_t next = 0;
  for (size_t i : work.live) {
    Queued& queued = work.batch[i];
    InferenceOutcome outcome;
    outcome.batch_images = work.images;
    if (!error.empty()) {
      outcome.status = InferenceOutcome::Status::kFailed;
      outcome.error = error;
    } else {
      for (size_t k = 0; k < queued.job.images.size(); ++k) {
        outcome.results.push_back(FilterDetections(std::move(results[next++]), queued.job.options));
      }
    }
    queued.job.done(std::move(outcome));
  }
}

}  // namespace mrcnn::serving
