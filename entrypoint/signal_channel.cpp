#include "entrypoint/signal_channel.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <system_error>

#include "entrypoint/child_process.h"

namespace mrcnn::entrypoint {

SignalChannel::SignalChannel(const std::vector<int>& extra_stop_signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : SupervisedSignals())
    sigaddset(&set, signal);
  // Children unblock everything (SpawnChild), so these reach them with their defaults.
  for (int signal : extra_stop_signals)
    sigaddset(&set, signal);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(), "sigprocmask");
  }
  std::signal(SIGPIPE, SIG_IGN);
  fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "signalfd");
}

SignalChannel::~SignalChannel() {
  if (fd_ >= 0)
    close(fd_);
}

std::vector<int> SignalChannel::ReadPending() {
  std::vector<int> signals;
  signalfd_siginfo info[16];
  for (;;) {
    const ssize_t n = read(fd_, info, sizeof(info));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof(signalfd_siginfo); ++i) {
      signals.push_back(static_cast<int>(info[i].ssi_signo));
    }
  }
  return signals;
}

std::optional<int> SignalChannel::SleepUnlessStopped(std::chrono::milliseconds duration) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  for (;;) {
    const auto left = std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now())
                                            .count());
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) > 0) {
      for (int signal : ReadPending()) {
        if (signal != SIGCHLD)
          return signal;
        // Nothing of ours runs yet; as PID 1 these are orphans handed to us.
        while (waitpid(-1, nullptr, WNOHANG) > 0) {
        }
      }
    }
    if (left == 0)
      return std::nullopt;
  }
}

}  // namespace mrcnn::entrypoint
