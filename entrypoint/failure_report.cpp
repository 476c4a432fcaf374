#include "entrypoint/failure_report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "entrypoint/fd_io.h"

namespace mrcnn::entrypoint {
namespace {

std::vector<std::string_view> NonEmptyLines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos)
      lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::string LimitReport(std::string text) {
  if (text.size() <= kFailureReportLimit)
    return text;
  std::size_t cut = kFailureReportLimit;
  // Step back over UTF-8 continuation bytes (10xxxxxx) to a character start.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  text.resize(cut);
  return text;
}

std::string DescribeRank(const std::string& host, int rank, int local_rank) {
  return fmt::format("rank {} (local rank {}) on {}", rank, local_rank, host);
}

std::string FormatChildFailure(const std::string& who, const ExitStatus& status,
                               std::string_view stderr_tail,
                               const std::vector<std::string>& notes) {
  const auto lines = NonEmptyLines(stderr_tail);
  std::string report = fmt::format("{} {}", who, status.Describe());
  if (!lines.empty()) {
    // The last thing a dying program prints is usually the error itself
    // (Python's "ValueError: ...", a CHECK message): lead with it.
    report += ": ";
    report += lines.back();
  }
  report += '\n';
  for (const std::string& note : notes) {
    report += note;
    report += '\n';
  }
  if (lines.size() > 1 && report.size() < kFailureReportLimit) {
    // As many of the last lines as fit, in their original order.
    const std::string heading = "stderr tail:\n";
    std::size_t budget =
        kFailureReportLimit - std::min(kFailureReportLimit, report.size() + heading.size());
    std::size_t first = lines.size();
    while (first > 0 && lines[first - 1].size() + 1 <= budget) {
      budget -= lines[first - 1].size() + 1;
      --first;
    }
    if (first < lines.size()) {
      report += heading;
      for (std::size_t i = first; i < lines.size(); ++i) {
        report.append(lines[i]);
        report += '\n';
      }
    }
  }
  return LimitReport(std::move(report));
}

bool WriteFailureOnce(const std::filesystem::path& file, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      LogLine(fmt::format("{} exists already; leaving it as it is", file.string()));
    } else {
      LogLine(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
    }
    return false;
  }
  const bool ok = WriteAll(fd, LimitReport(text));
  close(fd);
  return ok;
}

}  // namespace mrcnn::entrypoint
