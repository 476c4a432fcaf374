#include "tracking/mlflow_run.h"

#include <algorithm>
#include <fstream>

namespace mrcnn::tracking {
namespace {

// MLflow's runs/log-batch limits.
constexpr size_t kMaxMetrics = 1000;
constexpr size_t kMaxParams = 100;
constexpr size_t kMaxTags = 100;
constexpr size_t kMaxParamValue = 6000;
constexpr auto kMaxBackoff = std::chrono::seconds(30);

}  // namespace

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

MlflowRun::MlflowRun(std::unique_ptr<MlflowClient> client, MlflowRunOptions options,
                     std::function<void(const std::string&)> log)
    : client_(std::move(client)), options_(std::move(options)), log_(std::move(log)) {
  std::string truncated;
  for (auto& [key, value] : options_.params) {
    if (value.size() > kMaxParamValue) {
      value.resize(kMaxParamValue);
      truncated += (truncated.empty() ? "" : ",") + key;
    }
  }
  params_ = options_.params;
  tags_ = options_.tags;
  if (!truncated.empty()) {
    tags_.emplace_back("mrcnn.truncated_params", truncated);  // MLflow keeps 6000 characters
  }
  thread_ = std::thread([this] { Run(); });
}

MlflowRun::~MlflowRun() {
  Finish("FINISHED");
}

void MlflowRun::LogMetrics(std::vector<MlflowMetric> metrics) {
  Batch overflow;
  {
    std::lock_guard lock(mutex_);
    for (MlflowMetric& metric : metrics) {
      if (metrics_.size() < options_.max_queued_metrics && !final_status_) {
        metrics_.push_back(std::move(metric));
      } else {
        overflow.metrics.push_back(std::move(metric));
      }
    }
  }
  if (!overflow.metrics.empty()) {
    WriteUnsent(overflow);
  }
  wake_.notify_one();
}

void MlflowRun::SetTags(MlflowKeyValues tags) {
  {
    std::lock_guard lock(mutex_);
    tags_.insert(tags_.end(), tags.begin(), tags.end());
  }
  wake_.notify_one();
}

void MlflowRun::Finish(const std::string& status) {
  {
    std::lock_guard lock(mutex_);
    if (final_status_) {
      return;
    }
    final_status_ = status;
    finish_deadline_ = std::chrono::steady_clock::now() + options_.finish_timeout;
  }
  wake_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::string MlflowRun::run_id() const {
  std::lock_guard lock(mutex_);
  return info_ ? info_->run_id : std::string();
}

std::optional<MlflowRunInfo> MlflowRun::info() const {
  std::lock_guard lock(mutex_);
  return info_;
}

bool MlflowRun::EnsureRun() {
  {
    std::lock_guard lock(mutex_);
    if (info_) {
      return true;
    }
  }
  MlflowRunInfo info;
  if (!options_.run_id.empty()) {
    info = client_->GetRun(options_.run_id);
    if (info.status != "RUNNING") {
      client_->Post("runs/update", {{"run_id", info.run_id}, {"status", "RUNNING"}});
    }
    log_("[mlflow] continuing run " + info.run_id + " (experiment " + info.experiment_id + ") at " +
         client_->endpoint().http.Describe());
  } else {
    const std::string experiment = client_->ExperimentId(options_.experiment_name);
    info = client_->CreateRun(experiment, options_.run_name, NowMs(), {});
    log_("[mlflow] run " + info.run_id + " in experiment \"" + options_.experiment_name + "\" (" +
         experiment + ") at " + client_->endpoint().http.Describe());
  }
  std::lock_guard lock(mutex_);
  info_ = info;
  return true;
}

bool MlflowRun::TakeBatch(Batch& batch) {
  const size_t metrics = std::min(metrics_.size(), kMaxMetrics);
  batch.metrics.assign(std::make_move_iterator(metrics_.begin()),
                       std::make_move_iterator(metrics_.begin() + static_cast<long>(metrics)));
  metrics_.erase(metrics_.begin(), metrics_.begin() + static_cast<long>(metrics));
  const size_t params = std::min(params_.size(), kMaxParams);
  batch.params.assign(params_.begin(), params_.begin() + static_cast<long>(params));
  params_.erase(params_.begin(), params_.begin() + static_cast<long>(params));
  const size_t tags = std::min(tags_.size(), kMaxTags);
  batch.tags.assign(tags_.begin(), tags_.begin() + static_cast<long>(tags));
  tags_.erase(tags_.begin(), tags_.begin() + static_cast<long>(tags));
  return !batch.metrics.empty() || !batch.params.empty() || !batch.tags.empty();
}

void MlflowRun::Run() {
  auto backoff = std::chrono::seconds(1);
  bool disabled = false;  // the server refused the run itself: everything goes to the file
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] {
      return final_status_ || !info_ || !metrics_.empty() || !params_.empty() || !tags_.empty();
    });
    const bool finishing = final_status_.has_value();
    if (disabled || (finishing && std::chrono::steady_clock::now() >= finish_deadline_)) {
      break;
    }
    Batch batch;
    bool sent = false;
    std::optional<MlflowError> error;
    lock.unlock();
    try {
      if (EnsureRun()) {
        lock.lock();
        const bool any = TakeBatch(batch);
        const std::string id = info_->run_id;
        lock.unlock();
        if (!any) {
          lock.lock();
          if (finishing) {
            break;
          }
          continue;
        }
        client_->LogBatch(id, batch.metrics, batch.params, batch.tags);
        sent = true;
      }
    } catch (const MlflowError& e) {
      error = e;
    } catch (const std::exception& e) {
      error = MlflowError(e.what(), 400, "");
    }
    lock.lock();
    if (sent) {
      backoff = std::chrono::seconds(1);
      if (warned_unreachable_) {
        log_("[mlflow] the tracking server answers again; sending what was queued");
        warned_unreachable_ = false;
      }
      continue;
    }
    if (!error) {
      continue;
    }
    if (!error->retryable()) {
      log_(std::string("[mlflow] warning: ") + error->what() +
           (info_ ? "; these values go to " : "; tracking stops, values go to ") +
           options_.unsent_file.string());
      if (!info_) {
        disabled = true;
      }
      lock.unlock();
      WriteUnsent(batch);
      lock.lock();
      continue;
    }
    // Back into the queue, in order, and try again later.
    metrics_.insert(metrics_.begin(), std::make_move_iterator(batch.metrics.begin()),
                    std::make_move_iterator(batch.metrics.end()));
    params_.insert(params_.begin(), batch.params.begin(), batch.params.end());
    tags_.insert(tags_.begin(), batch.tags.begin(), batch.tags.end());
    if (!warned_unreachable_) {
      log_(std::string("[mlflow] warning: ") + error->what() +
           "; retrying with backoff (training " + "goes on)");
      warned_unreachable_ = true;
    }
    const auto until =
        std::min(std::chrono::steady_clock::now() + backoff,
                 final_status_ ? finish_deadline_ : std::chrono::steady_clock::time_point::max());
    wake_.wait_until(lock, until, [this, finishing] {
      return !finishing && final_status_.has_value();  // Finish called: hurry up
    });
    backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::seconds>(kMaxBackoff));
  }
  const std::optional<MlflowRunInfo> info = info_;
  const std::string status = final_status_.value_or("FINISHED");
  lock.unlock();
  WriteAllUnsent();
  if (info && !disabled) {
    try {
      client_->UpdateRun(info->run_id, status, NowMs());
      log_("[mlflow] run " + info->run_id + " ended: " + status);
    } catch (const std::exception& e) {
      log_(std::string("[mlflow] warning: could not set the run's status to ") + status + ": " +
           e.what());
    }
  }
}

void MlflowRun::WriteAllUnsent() {
  // In log-batch-sized lines, so each line replays as one call.
  while (true) {
    Batch line;
    {
      std::lock_guard lock(mutex_);
      if (!TakeBatch(line)) {
        break;
      }
    }
    WriteUnsent(line);
  }
  std::lock_guard lock(mutex_);
  if (unsent_records_ > 0) {
    log_("[mlflow] " + std::to_string(unsent_records_) + " unsent log-batch line(s) in " +
         options_.unsent_file.string() + " (replay: see tracking/README.md)");
  }
}

void MlflowRun::WriteUnsent(const Batch& batch) {
  if (batch.metrics.empty() && batch.params.empty() && batch.tags.empty()) {
    return;
  }
  std::lock_guard lock(mutex_);
  if (options_.unsent_file.has_parent_path()) {
    std::filesystem::create_directories(options_.unsent_file.parent_path());
  }
  std::ofstream out(options_.unsent_file, std::ios::app);
  out << LogBatchJson(info_ ? info_->run_id : options_.run_id, batch.metrics, batch.params,
                      batch.tags)
             .dump()
      << '\n';
  if (!out) {
    log_("[mlflow] warning: cannot append to " + options_.unsent_file.string() + "; " +
         std::to_string(batch.metrics.size()) + " metric values are lost");
    return;
  }
  ++unsent_records_;
}

}  // namespace mrcnn::tracking
