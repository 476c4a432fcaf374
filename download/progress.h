#pragma once
// The downloader's progress lines: one every few seconds, readable by a person and matched by
// a CloudWatch metric regex on the raw numbers, e.g.
//   [weights] R-50.pkl: 45.0 MB of 102.3 MB (44.0%) at 12.3 MB/s, eta 5 s [47185920/102341824
//   bytes]
// A regex for SageMaker's MetricDefinitions: "\[weights\] .*\[([0-9]+)/([0-9]+) bytes\]" (bytes
// so far and the total; "?" for the total when the server does not say it).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace mrcnn::download {

// The line for `bytes` of `total` received in `elapsed` (rate and ETA from the bytes received
// in this process, not those a resumed partial already held: `resumed_from`).
std::string ProgressLine(const std::string& name, uint64_t bytes, std::optional<uint64_t> total,
                         uint64_t resumed_from, std::chrono::duration<double> elapsed);

// Says when the next line is due: at most one per `period`.
class ProgressClock {
 public:
  explicit ProgressClock(std::chrono::steady_clock::duration period);
  // True, and restarts the period, when `now` is a period after the last line.
  bool Due(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::steady_clock::duration period_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace mrcnn::download
