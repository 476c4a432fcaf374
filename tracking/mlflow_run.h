#pragma once
// A training run in MLflow, fed from the training loop without ever slowing or breaking it:
// every call here only queues; one background thread creates (or resumes) the run, sends
// parameters, tags and metrics in runs/log-batch calls within MLflow's limits, retries what
// failed for a reason that may pass (no answer, 429, 5xx) with backoff (1 s doubling to 30 s),
// and at Finish sets the run's status. What it could not send by then (the server down at the
// end, a 4xx refusal, the queue past its bound) is appended to `unsent_file` as runs/log-batch
// bodies, one JSON object a line, so nothing is lost: replaying each line as a POST to
// <tracking URI>/api/2.0/mlflow/runs/log-batch sends it (README.md). Messages go to `log`.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tracking/mlflow_client.h"

namespace mrcnn::tracking {

struct MlflowRunOptions {
  std::string experiment_name;
  std::string run_id;    // an existing run to continue; empty: create one
  std::string run_name;  // for a new run
  MlflowKeyValues tags;
  MlflowKeyValues params;
  std::filesystem::path unsent_file;
  size_t max_queued_metrics = 100000;
  // How long Finish waits for the queue to drain before writing the rest to unsent_file.
  std::chrono::seconds finish_timeout{60};
};

class MlflowRun {
 public:
  // Starts the sender thread; returns at once.
  MlflowRun(std::unique_ptr<MlflowClient> client, MlflowRunOptions options,
            std::function<void(const std::string&)> log);
  // Finish("FINISHED") unless Finish was called.
  ~MlflowRun();
  MlflowRun(const MlflowRun&) = delete;
  MlflowRun& operator=(const MlflowRun&) = delete;

  void LogMetrics(std::vector<MlflowMetric> metrics);
  void SetTags(MlflowKeyValues tags);
  // FINISHED, FAILED or KILLED; sends what is queued (up to finish_timeout), sets the status,
  // stops the thread. A second call does nothing.
  void Finish(const std::string& status);
  // The run's id once created or resumed (empty before, or when the server never answered).
  std::string run_id() const;
  // The run's artifact location etc., once known.
  std::optional<MlflowRunInfo> info() const;
  MlflowClient& client() { return *client_; }

 private:
  struct Batch {
    std::vector<MlflowMetric> metrics;
    MlflowKeyValues params;
    MlflowKeyValues tags;
  };
  void Run();
  bool EnsureRun();  // on the sender thread
  bool TakeBatch(Batch& batch);
  void WriteUnsent(const Batch& batch);
  void WriteAllUnsent();

  std::unique_ptr<MlflowClient> client_;
  MlflowRunOptions options_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<MlflowMetric> metrics_;
  MlflowKeyValues params_;
  MlflowKeyValues tags_;
  std::optional<MlflowRunInfo> info_;
  std::optional<std::string> final_status_;
  std::chrono::steady_clock::time_point finish_deadline_;
  bool warned_unreachable_ = false;
  size_t unsent_records_ = 0;
  std::thread thread_;
};

int64_t NowMs();

}  // namespace mrcnn::tracking
