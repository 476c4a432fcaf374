#pragma once
// output/failure: SageMaker shows its first 1024 bytes as the job's
// FailureReason, so the root cause comes first and the file is written once.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "entrypoint/exit_status.h"

namespace mrcnn::entrypoint {

constexpr std::size_t kFailureReportLimit = 1024;

// Who a process was: "rank 3 (local rank 1) on algo-2".
std::string DescribeRank(const std::string& host, int rank, int local_rank);

// "rank 3 (local rank 1) on algo-2 was killed by signal SIGSEGV (11): <last stderr line>\n",
// then `notes` (one line each: what else the supervisor saw, e.g. a stopped peer), then
// "stderr tail:\n" and the last lines of stderr that fit, oldest first. Never longer than
// kFailureReportLimit bytes and never ends inside a UTF-8 sequence.
std::string FormatChildFailure(const std::string& who, const ExitStatus& status,
                               std::string_view stderr_tail,
                               const std::vector<std::string>& notes = {});

// Truncates to kFailureReportLimit bytes at a UTF-8 boundary.
std::string LimitReport(std::string text);

// Creates `file` with `text` unless it already exists (a user's or an earlier
// supervisor's report is the better root cause). Returns true when written.
// Never throws: a report that cannot be written is logged, not fatal.
bool WriteFailureOnce(const std::filesystem::path& file, const std::string& text);

}  // namespace mrcnn::entrypoint
