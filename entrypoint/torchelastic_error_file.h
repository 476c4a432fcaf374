#pragma once
// torchrun's error file: torchrun gives every worker a path in TORCHELASTIC_ERROR_FILE and,
// when the worker fails, shows what it finds there as the "Root Cause" of the job (message
// and time); without it the summary says `error_file: <N/A>`. Under torchrun the
// entrypoint is that worker, so it writes the file from the same report as output/failure,
// in the JSON torch's own `@record` writes:
//   {"message": {"message": "<first line>",
//                "extraInfo": {"py_callstack": "<the whole report>", "timestamp": "<unix s>"}}}
// torch shows py_callstack as the traceback, and of several failed ranks takes the one with
// the earliest timestamp as the root cause.
#include <chrono>
#include <filesystem>
#include <string>

namespace mrcnn::entrypoint {

// The JSON above for `report` (bytes that are not UTF-8 become U+FFFD).
std::string TorchelasticErrorJson(const std::string& report,
                                  std::chrono::system_clock::time_point when);

// Writes the JSON to `file` unless it exists already (the child, a Python program under
// torch's `@record`, wrote its own: the better root cause). Never throws: a file that
// cannot be written is logged. Returns true when written.
bool WriteTorchelasticErrorFile(const std::filesystem::path& file, const std::string& report,
                                std::chrono::system_clock::time_point when);

}  // namespace mrcnn::entrypoint
