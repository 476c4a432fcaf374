#pragma once
// The supervisor's signals as readable data: SupervisedSignals() are blocked
// and delivered through a signalfd, so the event loop sees them between reads
// and nothing runs in a signal handler. SIGPIPE is ignored (a closed log reader
// must not kill the supervisor). Children get all of it back to defaults (see
// SpawnChild).
#include <chrono>
#include <optional>
#include <vector>

namespace mrcnn::entrypoint {

class SignalChannel {
 public:
  // `extra_stop_signals` (TORCHELASTIC_SIGNALS_TO_HANDLE beyond SIGTERM/SIGINT/SIGHUP) are
  // taken over too and count as stop signals.
  explicit SignalChannel(const std::vector<int>& extra_stop_signals = {});
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_; }

  // Every signal queued now, without blocking (SIGCHLD is coalesced by the kernel).
  std::vector<int> ReadPending();

  // Sleeps up to `duration`; returns the first stop signal (SIGTERM, SIGINT,
  // SIGHUP, or an extra one) that arrives meanwhile. SIGCHLD is left for the caller's reaping.
  std::optional<int> SleepUnlessStopped(std::chrono::milliseconds duration);

 private:
  int fd_ = -1;
};

}  // namespace mrcnn::entrypoint
