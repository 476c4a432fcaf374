#include "download/progress.h"

#include <cstdio>

namespace mrcnn::download {
namespace {

std::string Megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  return text;
}

}  // namespace

std::string ProgressLine(const std::string& name, uint64_t bytes, std::optional<uint64_t> total,
                         uint64_t resumed_from, std::chrono::duration<double> elapsed) {
  const double seconds = elapsed.count();
  const double fresh = bytes > resumed_from ? static_cast<double>(bytes - resumed_from) : 0.0;
  const double rate = seconds > 0 ? fresh / seconds : 0.0;
  std::string line = "[weights] " + name + ": " + Megabytes(static_cast<double>(bytes));
  if (total && *total > 0) {
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.1f%%",
                  100.0 * static_cast<double>(bytes) / static_cast<double>(*total));
    line += " of " + Megabytes(static_cast<double>(*total)) + " (" + percent + ")";
  }
  line += " at " + Megabytes(rate) + "/s";
  if (total && rate > 0 && *total >= bytes) {
    line +=
        ", eta " +
        std::to_string(static_cast<uint64_t>(static_cast<double>(*total - bytes) / rate + 0.5)) +
        " s";
  }
  line += " [" + std::to_string(bytes) + "/" + (total ? std::to_string(*total) : "?") + " bytes]";
  return line;
}

ProgressClock::ProgressClock(std::chrono::steady_clock::duration period)
    : period_(period), last_(std::chrono::steady_clock::now()) {}

bool ProgressClock::Due(std::chrono::steady_clock::time_point now) {
  if (now - last_ < period_)
    return false;
  last_ = now;
  return true;
}

}  // namespace mrcnn::download
