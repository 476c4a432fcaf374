#pragma once
// One whole line per call on stderr, written with a single write(2) so lines from the I/O,
// CPU and inference threads never interleave inside a line (CloudWatch metric regexes).
#include <fmt/format.h>
#include <unistd.h>

#include <string>

namespace mrcnn::serving {

template <typename... Args>
void LogLine(fmt::format_string<Args...> format, Args&&... args) {
  std::string line = "[server] " + fmt::format(format, std::forward<Args>(args)...) + "\n";
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t written = ::write(STDERR_FILENO, data, left);
    if (written <= 0) {
      return;
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
}

}  // namespace mrcnn::serving
