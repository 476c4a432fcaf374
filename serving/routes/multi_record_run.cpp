#include "serving/routes/multi_record_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "serving/codec/image_decoding.h"
#include "serving/codec/json_lines_decoding.h"
#include "serving/codec/response_encoding.h"
#include "serving/http/http_error.h"
#include "serving/http/log_line.h"

namespace mrcnn::serving {
namespace {

constexpr auto kRetryInterval = std::chrono::milliseconds(10);

}  // namespace

void MultiRecordRun::Start(std::vector<uint8_t> body, PredictOptions options,
                           std::chrono::steady_clock::time_point deadline,
                           InvocationServices services,
                           std::shared_ptr<ServerLifecycle::Admission> admission, Reply reply) {
  auto run = std::make_shared<MultiRecordRun>(std::move(body), options, deadline, services,
                                              std::move(admission), std::move(reply));
  run->Pump();
}

MultiRecordRun::MultiRecordRun(std::vector<uint8_t> body, PredictOptions options,
                               std::chrono::steady_clock::time_point deadline,
                               InvocationServices services,
                               std::shared_ptr<ServerLifecycle::Admission> admission, Reply reply)
    : body_(std::move(body)),
      lines_(SplitJsonLines(body_)),
      options_(options),
      deadline_(deadline),
      services_(services),
      window_(static_cast<size_t>(2 * std::max(1, services.config->batching.workers) *
                                  std::max(1, services.config->batching.max_batch_images))),
      admission_(std::move(admission)),
      reply_(std::move(reply)),
      answers_(lines_.size()) {
  records_.resize(lines_.size());
}

void MultiRecordRun::Pump() {
  while (true) {
    size_t index = 0;
    bool finish = false;
    {
      std::lock_guard lock(mutex_);
      if (over_) {
        return;
      }
      if (answered_ == lines_.size()) {
        over_ = true;
        finish = true;
      } else {
        if (in_flight_ >= window_) {
          return;
        }
        if (!retry_.empty()) {
          index = retry_.front();
          retry_.pop_front();
        } else if (next_ < lines_.size()) {
          index = next_++;
        } else {
          return;  // the records in flight pump again when they finish
        }
        ++in_flight_;
      }
    }
    if (finish) {
      Finish();
      return;
    }
    if (!Process(index)) {
      return;
    }
  }
}

bool MultiRecordRun::Process(size_t index) {
  const size_t line_number = index + 1;
  // Only this thread touches records_[index] until the record is answered or retried (the
  // hand-offs go through mutex_ or the executor's queue).
  std::optional<JsonLineRecord>& record = records_[index];
  if (!record) {
    record = DecodeJsonLine(lines_[index], line_number);
  }
  if (record->error) {
    Record(index,
           EncodeRecordErrorJson(record->error->code(), record->error->detail(), record->id));
    return true;
  }
  // A full queue would turn the job away: do not decode the pixels only to drop them.
  const bool queue_full =
      services_.executor->QueueDepth() >= services_.config->batching.queue_capacity;
  InferenceJob job;
  try {
    if (!queue_full) {
      job.images.push_back(DecodeImage(record->image(), services_.config->image_limits));
    }
  } catch (const HttpError& e) {
    Record(index, EncodeRecordErrorJson(
                      e.code(), fmt::format("line {}: {}", line_number, e.detail()), record->id));
    return true;
  }
  job.options = options_;
  job.deadline = deadline_;
  job.done = [self = shared_from_this(), index](InferenceOutcome&& outcome) {
    boost::asio::post(*self->services_.cpu_pool,
                      [self, index, outcome = std::move(outcome)]() mutable {
                        self->OnRecordDone(index, std::move(outcome));
                        self->Pump();
                      });
  };
  const auto submitted = queue_full ? InferenceExecutor::SubmitResult::kQueueFull
                                    : services_.executor->TrySubmit(std::move(job));
  if (submitted == InferenceExecutor::SubmitResult::kAccepted) {
    return true;
  }
  if (submitted != InferenceExecutor::SubmitResult::kQueueFull) {
    Fail(RefusedJobAnswer(submitted, *services_.config));
    return false;
  }
  bool none_of_ours_queued = false;
  {
    std::lock_guard lock(mutex_);
    --in_flight_;
    retry_.push_back(index);  // submitted again when there is room (its bytes are kept)
    none_of_ours_queued = in_flight_ == 0;
  }
  if (none_of_ours_queued) {
    // Other requests fill the queue: no record of ours will finish and pump, so look again
    // shortly (until the deadline) rather than fail records that were admitted.
    RetryLater();
  }
  return false;
}

void MultiRecordRun::RetryLater() {
  if (std::chrono::steady_clock::now() >= deadline_) {
    Fail(DeadlineExceededAnswer(*services_.config));
    return;
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(*services_.cpu_pool, kRetryInterval);
  timer->async_wait(
      [self = shared_from_this(), timer](boost::system::error_code) { self->Pump(); });
}

void MultiRecordRun::OnRecordDone(size_t index, InferenceOutcome outcome) {
  using Status = InferenceOutcome::Status;
  const size_t line_number = index + 1;
  switch (outcome.status) {
    case Status::kOk:
      try {
        {
          std::lock_guard lock(mutex_);
          batch_images_ = std::max(batch_images_, outcome.batch_images);
        }
        Record(index, EncodeRecordJson(outcome.results.at(0), options_.masks, records_[index]->id));
      } catch (const std::exception& e) {
        LogLine("error encoding line {} of a response: {}", line_number, e.what());
        Record(index, EncodeRecordErrorJson("internal_error", e.what(), records_[index]->id));
      }
      return;
    case Status::kFailed:
      LogLine("inference failed on line {}: {}", line_number, outcome.error);
      Record(index, EncodeRecordErrorJson(
                        "inference_failed",
                        fmt::format("line {}: the model failed on this record's batch: {}",
                                    line_number, outcome.error),
                        records_[index]->id));
      return;
    case Status::kDeadlineExceeded:
      Fail(DeadlineExceededAnswer(*services_.config));
      return;
    case Status::kStopped:
      Fail(ErrorAnswer(503, "shutting_down", "the server is shutting down"));
      return;
  }
}

void MultiRecordRun::Record(size_t index, std::string line) {
  std::lock_guard lock(mutex_);
  if (records_[index]) {
    records_[index]->owned = {};  // answered: its bytes are of no further use
  }
  answers_[index] = std::move(line);
  --in_flight_;
  ++answered_;
}

void MultiRecordRun::Finish() {
  std::vector<uint8_t>().swap(body_);  // every record is read: the body can go first
  size_t size = 0;
  for (const std::string& line : answers_) {
    size += line.size() + 1;
  }
  std::string body;
  body.reserve(size);
  // Separated, not terminated: batch transform with AssembleWith=Line appends a newline
  // after every response, so a trailing one here would put a blank line into the output
  // between requests and misalign it with the input.
  for (size_t i = 0; i < answers_.size(); ++i) {
    if (i > 0)
      body += '\n';
    body += answers_[i];
    std::string().swap(answers_[i]);
  }
  RouteAnswer answer{200, std::move(body), "application/jsonlines", {}};
  if (batch_images_ > 0) {
    answer.headers.emplace_back("X-Mrcnn-Batch-Images", std::to_string(batch_images_));
  }
  reply_(std::move(answer));
  admission_.reset();
}

void MultiRecordRun::Fail(RouteAnswer answer) {
  {
    std::lock_guard lock(mutex_);
    if (over_) {
      return;
    }
    over_ = true;
  }
  reply_(std::move(answer));
  admission_.reset();
}

}  // namespace mrcnn::serving
