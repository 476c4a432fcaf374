#pragma once
// The supervision loop: starts the children, forwards their output line by
// line, forwards stop signals, reaps every process (orphans included), applies
// the failure policy and reports the first failure.
//
// Policy:
//  - The first child that exits non-zero or dies of a signal, before any stop
//    was requested, is the root cause: every other child's process group gets
//    SIGTERM, and SIGKILL once `grace` has passed. The supervisor exits with the
//    root cause's code (128 + signal for a signal) and writes `failure_file`
//    (if set and absent) once that child's output has drained, and likewise
//    `torchelastic_error_file`.
//  - A child that is stopped (SIGSTOP, SIGTSTP, ...) when the job is being
//    stopped cannot act on SIGTERM: its group gets SIGKILL at once instead of
//    after the grace period, and the failure report says it was stopped (a
//    stalled rank is usually why its peers failed).
//  - SIGTERM/SIGINT/SIGHUP to the supervisor go to every child's process group
//    at once, with the same grace. Exit code: 0 when every child then exits 0,
//    otherwise 128 + the received signal. No failure file: the platform stopped us.
//  - When every child has exited, left-over descendants (members of the
//    children's process groups and orphans reparented to us) get SIGTERM, then
//    SIGKILL after `leftover_grace`; the loop ends when they are gone and every
//    pipe is drained.
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "entrypoint/child_process.h"
#include "entrypoint/signal_channel.h"

namespace mrcnn::entrypoint {

struct SupervisedChild {
  ChildSpec spec;
  int rank = 0;        // global rank, for prefixes and the failure report
  int local_rank = 0;  // for the failure report
};

struct SupervisorOptions {
  std::chrono::milliseconds grace{110'000};
  std::chrono::milliseconds leftover_grace{2'000};
  bool rank_prefix = false;            // "[rank N] " on every line of ranks other than 0
  std::string host;                    // for the failure report
  std::filesystem::path failure_file;  // empty: never written
  // TORCHELASTIC_ERROR_FILE under torchrun (empty: none): the same root cause in torch's
  // JSON (torchelastic_error_file.h), written once, when and as failure_file is.
  std::filesystem::path torchelastic_error_file;
  int stdout_fd = 1;
  int stderr_fd = 2;
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, SignalChannel& signals);

  // An extra descriptor served by the loop while children run (e.g. the
  // rendezvous listener, so late peers are still answered).
  void Watch(int fd, std::function<void()> on_readable);

  // Runs the children to the end; returns the supervisor's exit code.
  int Run(std::vector<SupervisedChild> children);

 private:
  SupervisorOptions options_;
  SignalChannel& signals_;
  std::vector<std::pair<int, std::function<void()>>> watches_;
};

}  // namespace mrcnn::entrypoint
