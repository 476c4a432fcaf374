#pragma once
// This process's resources from /proc (Linux), under the names Prometheus's client libraries
// give them, so dashboards made for those work unchanged. A field /proc does not give (another
// OS, a restricted /proc) is left out rather than reported as 0.
#include <optional>

namespace mrcnn::serving {

struct ProcessStatistics {
  std::optional<double> resident_memory_bytes;
  std::optional<double> virtual_memory_bytes;
  std::optional<double> cpu_seconds;  // user + system
  std::optional<double> open_fds;
  std::optional<double> start_time_seconds;  // since the Unix epoch
};

ProcessStatistics ReadProcessStatistics();

}  // namespace mrcnn::serving
