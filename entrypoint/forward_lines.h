#pragma once
// Re-assembles one child stream into whole lines and writes them to one of our
// own descriptors.
//
// Contract:
//  - Only complete lines are written, and each Consume() hands all complete
//    lines it has to one writev() call. The supervisor is the only writer of its
//    stdout/stderr and writes from one thread, so no two lines (of any child,
//    on either stream) can be interleaved or split by us.
//  - Bytes after the last newline wait for the next Consume(); Finish() (at EOF)
//    delivers them with a newline added, so a last line without one is not lost.
//  - A line longer than max_line bytes is delivered in max_line pieces, each
//    ending with a newline, so a child that never writes a newline cannot make
//    us buffer without bound nor hold the stream hostage.
//  - prefix (e.g. "[rank 3] ") goes in front of every line written; empty = none.
#include <cstddef>
#include <string>
#include <string_view>

namespace mrcnn::entrypoint {

class ForwardLines {
 public:
  static constexpr std::size_t kDefaultMaxLine = 64 * 1024;

  ForwardLines(int out_fd, std::string prefix, std::size_t max_line = kDefaultMaxLine);

  void Consume(std::string_view data);
  void Finish();

  std::size_t lines_written() const { return lines_written_; }

 private:
  void EmitPrefixed(std::string_view data);  // data: whole lines only
  void FlushOverlongPending();

  int out_fd_;
  std::string prefix_;
  std::size_t max_line_;
  std::string pending_;  // a line begun but not finished
  std::string scratch_;  // prefixed output of one Consume()
  std::size_t lines_written_ = 0;
};

// The last bytes a stream carried, cut at line boundaries: the context for a
// failure report. Cheap enough to feed every byte of a child's stderr.
class TailLines {
 public:
  explicit TailLines(std::size_t keep_bytes = 4096) : keep_bytes_(keep_bytes) {}

  void Consume(std::string_view data);
  // The kept text, starting at a line boundary (a line cut by the window is dropped).
  std::string Text() const;

 private:
  std::size_t keep_bytes_;
  std::string buffer_;
  bool truncated_ = false;
};

}  // namespace mrcnn::entrypoint
