#include "download/http_download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <vector>

#include "download/download_error.h"
#include "download/http_connection.h"
#include "download/progress.h"
#include "download/proxy.h"
#include "download/resume_plan.h"

namespace mrcnn::download {
namespace fs = std::filesystem;
namespace {

bool IsRedirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// The partial file opened for the body: appended to, or written from its start.
class PartialFile {
 public:
  PartialFile(const fs::path& path, bool append) : path_(path) {
    fd_ =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd_ < 0)
      Fail("cannot open");
  }
  ~PartialFile() { ::close(fd_); }
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;

  void Write(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        Fail("cannot write");
      data += n;
      size -= static_cast<size_t>(n);
    }
  }
  void Sync() {
    if (::fsync(fd_) != 0)
      Fail("cannot flush");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    // A full disk will not empty itself between tries.
    throw DownloadError(false, what + " " + path_.string() + ": " + std::strerror(errno));
  }
  fs::path path_;
  int fd_ = -1;
};

// What an error answer says: its status, and S3's <Code> and <Message> when the body has them.
std::string DescribeStatus(const AnswerHead& head, HttpConnection& connection, const Url& url) {
  std::string text =
      "HTTP " + std::to_string(head.status) + " " + head.reason + " from " + url.ToString();
  std::string body(4096, '\0');
  size_t got = 0;
  try {
    while (got < body.size()) {
      const size_t n = connection.ReadBody(body.data() + got, body.size() - got);
      if (n == 0)
        break;
      got += n;
    }
  } catch (const DownloadError&) {
    // the status says enough
  }
  body.resize(got);
  static const std::regex code(R"(<Code>([^<]{1,100})</Code>)");
  static const std::regex message(R"(<Message>([^<]{1,200})</Message>)");
  std::smatch m;
  std::string detail;
  if (std::regex_search(body, m, code))
    detail = m[1].str();
  if (std::regex_search(body, m, message))
    detail += (detail.empty() ? "" : ": ") + m[1].str();
  return detail.empty() ? text : text + " (" + detail + ")";
}

uint64_t SizeOf(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  return ec ? 0 : size;
}

// Streams the body onto `partial`, with progress lines; checks that it is whole.
void ReceiveBody(HttpConnection& connection, const ResumePlan& plan, const fs::path& partial,
                 const DownloadTarget& target, const DownloadOptions& options, const LogLine& log) {
  const bool append = plan.action == ResumeAction::kAppend;
  const uint64_t start = append ? SizeOf(partial) : 0;
  PartialFile file(partial, append);
  std::vector<char> buffer(1 << 16);
  uint64_t have = start;
  ProgressClock clock(options.progress_period);
  const auto started = std::chrono::steady_clock::now();
  try {
    for (size_t n; (n = connection.ReadBody(buffer.data(), buffer.size())) > 0;) {
      file.Write(buffer.data(), n);
      have += n;
      if (clock.Due(std::chrono::steady_clock::now())) {
        log(ProgressLine(target.name, have, plan.total, start,
                         std::chrono::steady_clock::now() - started));
      }
    }
  } catch (const DownloadError& e) {
    throw DownloadError(e.retryable(), std::string(e.what()) + " (" + std::to_string(have) +
                                           " of " +
                                           (plan.total ? std::to_string(*plan.total) : "?") +
                                           " bytes received: truncated)");
  }
  file.Sync();
  if (plan.total && have != *plan.total) {
    throw DownloadError(true, "the body ended after " + std::to_string(have) + " of " +
                                  std::to_string(*plan.total) + " bytes (truncated)");
  }
  log(ProgressLine(target.name, have, plan.total, start,
                   std::chrono::steady_clock::now() - started));
}

}  // namespace

void DownloadOnce(const DownloadTarget& target, const fs::path& partial,
                  const DownloadOptions& options, const common::EnvMap& env, const LogLine& log) {
  const ConnectionTimeouts timeouts{options.connect_timeout, options.idle_timeout};
  Url url = target.url;
  bool redirected = false;  // the signature is for the first URL alone
  // Redirects, and one fresh start when a server's answer to Range cannot be used.
  for (int hop = 0; hop <= options.max_redirects + 1; ++hop) {
    const uint64_t have = SizeOf(partial);
    tracking::HeaderList headers;
    if (have > 0)
      headers.emplace_back("Range", "bytes=" + std::to_string(have) + "-");
    if (!redirected && target.sign) {
      const tracking::HeaderList signature = target.sign(headers);
      headers.insert(headers.end(), signature.begin(), signature.end());
    }
    HttpConnection connection(url, ProxyFor(url, env), timeouts);
    const AnswerHead head = connection.Get(headers);
    if (IsRedirect(head.status) && !head.location.empty()) {
      url = ResolveRedirect(url, head.location);
      redirected = true;
      continue;
    }
    const ResumePlan plan = PlanResume(have, head.status, head.content_length, head.content_range);
    if (plan.action == ResumeAction::kComplete)
      return;
    if (plan.action == ResumeAction::kDiscard) {
      fs::remove(partial);
      continue;
    }
    if (plan.action == ResumeAction::kNotABody) {
      const bool retryable = head.status >= 500 || head.status == 408 || head.status == 429;
      throw DownloadError(retryable, DescribeStatus(head, connection, url));
    }
    if (have > 0) {
      log("[weights] " + target.name + ": " +
          (plan.action == ResumeAction::kAppend
               ? "resuming after " + std::to_string(have) + " bytes"
               : "the server ignored Range: starting again from byte 0"));
    }
    ReceiveBody(connection, plan, partial, target, options, log);
    return;
  }
  throw DownloadError(false, "more than " + std::to_string(options.max_redirects) +
                                 " redirects (or answers to Range that could not be used), the "
                                 "last from " +
                                 url.ToString());
}

}  // namespace mrcnn::download
