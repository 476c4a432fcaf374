#include "entrypoint/forward_lines.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "entrypoint/fd_io.h"

namespace mrcnn::entrypoint {

ForwardLines::ForwardLines(int out_fd, std::string prefix, std::size_t max_line)
    : out_fd_(out_fd), prefix_(std::move(prefix)), max_line_(std::max<std::size_t>(max_line, 1)) {}

void ForwardLines::Consume(std::string_view data) {
  const void* last_newline = memrchr(data.data(), '\n', data.size());
  if (last_newline == nullptr) {
    pending_.append(data);
    FlushOverlongPending();
    return;
  }
  const auto whole =
      static_cast<std::size_t>(static_cast<const char*>(last_newline) - data.data()) + 1;
  const std::string_view lines = data.substr(0, whole);
  if (prefix_.empty()) {
    // The common case (rank 0, or prefixes off): no copy, pending bytes and the
    // new lines leave in one writev.
    iovec iov[2] = {{pending_.data(), pending_.size()},
                    {const_cast<char*>(lines.data()), lines.size()}};
    WriteAllV(out_fd_, iov, 2);
    lines_written_ += static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n'));
    pending_.clear();
  } else {
    pending_.append(lines);
    EmitPrefixed(pending_);
    pending_.clear();
  }
  pending_.append(data.substr(whole));
  FlushOverlongPending();
}

void ForwardLines::EmitPrefixed(std::string_view data) {
  scratch_.clear();
  std::size_t start = 0;
  while (start < data.size()) {
    const std::size_t end = data.find('\n', start);
    scratch_ += prefix_;
    scratch_.append(data.substr(start, end - start + 1));
    ++lines_written_;
    start = end + 1;
  }
  WriteAll(out_fd_, scratch_);
}

void ForwardLines::FlushOverlongPending() {
  if (pending_.size() < max_line_)
    return;
  std::string pieces;
  std::size_t start = 0;
  while (pending_.size() - start >= max_line_) {
    pieces.append(pending_, start, max_line_);
    pieces += '\n';
    start += max_line_;
  }
  pending_.erase(0, start);
  if (prefix_.empty()) {
    WriteAll(out_fd_, pieces);
    lines_written_ += static_cast<std::size_t>(std::count(pieces.begin(), pieces.end(), '\n'));
  } else {
    EmitPrefixed(pieces);
  }
}

void ForwardLines::Finish() {
  if (pending_.empty())
    return;
  pending_ += '\n';
  const std::string last = std::move(pending_);
  pending_.clear();
  Consume(last);
}

void TailLines::Consume(std::string_view data) {
  buffer_.append(data);
  // Trim only when twice over budget: amortised O(1) per byte.
  if (buffer_.size() > 2 * keep_bytes_) {
    buffer_.erase(0, buffer_.size() - keep_bytes_);
    truncated_ = true;
  }
}

std::string TailLines::Text() const {
  std::string_view text = buffer_;
  if (text.size() > keep_bytes_) {
    text.remove_prefix(text.size() - keep_bytes_);
  }
  if (truncated_ || text.size() < buffer_.size()) {
    const std::size_t newline = text.find('\n');
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
  }
  return std::string(text);
}

}  // namespace mrcnn::entrypoint
