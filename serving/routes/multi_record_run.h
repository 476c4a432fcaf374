#pragma once
// One application/jsonlines /invocations request (codec/json_lines_decoding.h) on its way through
// the model. Its records are decoded and submitted one image per InferenceJob, at most
// `window` at a time (2 x workers x batch size): the executor spreads them over its workers
// and batches them with other requests' images, while the decoded pixels this request holds
// stay bounded however many lines it has. A record that cannot be read or decoded, or whose
// model batch failed, is answered with an error line; the request succeeds with one line
// per record, in order:
//   200 application/jsonlines, every line ending in '\n', X-Mrcnn-Batch-Images = the largest
//   model call among its records.
// A record the full inference queue turns away waits (for one of the request's own records
// to finish, or 10 ms when none is queued) and goes again. The whole request fails (503)
// only for what is no record's fault: the deadline, shutdown.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serving/codec/json_lines_decoding.h"
#include "serving/models/predictor.h"
#include "serving/routes/invocation_route.h"

namespace mrcnn::serving {

class MultiRecordRun : public std::enable_shared_from_this<MultiRecordRun> {
 public:
  // On the CPU pool. `admission` is held until the answer is given.
  static void Start(std::vector<uint8_t> body, PredictOptions options,
                    std::chrono::steady_clock::time_point deadline, InvocationServices services,
                    std::shared_ptr<ServerLifecycle::Admission> admission, Reply reply);

  MultiRecordRun(std::vector<uint8_t> body, PredictOptions options,
                 std::chrono::steady_clock::time_point deadline, InvocationServices services,
                 std::shared_ptr<ServerLifecycle::Admission> admission, Reply reply);

 private:
  // Decodes and submits records while the window has room; the thread that answers the
  // last record sends the answer.
  void Pump();
  // False when this thread should stop pumping (the queue was full: a record of ours
  // finishing, or RetryLater, pumps again).
  bool Process(size_t index);
  // Pumps again in 10 ms on the CPU pool; fails the request once past its deadline.
  void RetryLater();
  void OnRecordDone(size_t index, InferenceOutcome outcome);
  void Record(size_t index, std::string line);
  void Finish();
  void Fail(RouteAnswer answer);

  std::vector<uint8_t> body_;
  std::vector<std::span<uint8_t>> lines_;  // into body_; a record's base64 is decoded in place
  // Per record, once its line is read: the image bytes, kept for a retry (the line itself
  // was overwritten by the decoding).
  std::vector<std::optional<JsonLineRecord>> records_;
  const PredictOptions options_;
  const std::chrono::steady_clock::time_point deadline_;
  const InvocationServices services_;
  const size_t window_;
  std::shared_ptr<ServerLifecycle::Admission> admission_;
  Reply reply_;

  std::mutex mutex_;
  std::vector<std::string> answers_;  // one line per record, without its '\n'
  size_t next_ = 0;                   // the next record never taken
  std::deque<size_t> retry_;          // records the full queue turned away
  size_t in_flight_ = 0;              // taken and not yet answered
  size_t answered_ = 0;
  int batch_images_ = 0;
  bool over_ = false;  // answered (or failed): nothing more to do
};

}  // namespace mrcnn::serving
