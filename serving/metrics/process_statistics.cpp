#include "serving/metrics/process_statistics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace mrcnn::serving {
namespace {

// /proc/stat's btime: the boot time, seconds since the epoch.
std::optional<double> BootTime() {
  std::ifstream stat("/proc/stat");
  std::string key;
  double value = 0;
  while (stat >> key) {
    if (key == "btime" && stat >> value) {
      return value;
    }
    stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

}  // namespace

ProcessStatistics ReadProcessStatistics() {
  ProcessStatistics statistics;
  std::ifstream stat_file("/proc/self/stat");
  std::string line;
  if (std::getline(stat_file, line)) {
    // The command name (field 2) is in parentheses and may hold spaces: fields are counted
    // from the last ')'.
    const size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::vector<std::string> fields;  // fields[0] is field 3 (state)
      for (std::string field; rest >> field;) {
        fields.push_back(field);
      }
      const long ticks = sysconf(_SC_CLK_TCK);
      const long page = sysconf(_SC_PAGESIZE);
      if (fields.size() > 21 && ticks > 0 && page > 0) {
        const double utime = std::stod(fields[11]);      // field 14
        const double stime = std::stod(fields[12]);      // field 15
        const double starttime = std::stod(fields[19]);  // field 22
        statistics.cpu_seconds = (utime + stime) / static_cast<double>(ticks);
        statistics.virtual_memory_bytes = std::stod(fields[20]);                               // 23
        statistics.resident_memory_bytes = std::stod(fields[21]) * static_cast<double>(page);  // 24
        if (const auto boot = BootTime()) {
          statistics.start_time_seconds = *boot + starttime / static_cast<double>(ticks);
        }
      }
    }
  }
  std::error_code error;
  std::filesystem::directory_iterator fds("/proc/self/fd", error);
  if (!error) {
    double count = 0;
    for (auto it = fds; it != std::filesystem::directory_iterator(); it.increment(error)) {
      if (error) {
        break;
      }
      ++count;
    }
    if (!error) {
      statistics.open_fds = count - 1;  // the iterator's own descriptor
    }
  }
  return statistics;
}

}  // namespace mrcnn::serving
