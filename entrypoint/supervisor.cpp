#include "entrypoint/supervisor.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>
#include <optional>
#include <system_error>

#include "entrypoint/descendants.h"
#include "entrypoint/exit_status.h"
#include "entrypoint/failure_report.h"
#include "entrypoint/fd_io.h"
#include "entrypoint/forward_lines.h"
#include "entrypoint/signals_to_handle.h"
#include "entrypoint/torchelastic_error_file.h"

namespace mrcnn::entrypoint {
namespace {

using Clock = std::chrono::steady_clock;

// A pipe of one child and where its lines go.
struct Stream {
  int fd = -1;
  ForwardLines forward;
  TailLines* tail = nullptr;  // stderr only
};

struct Slot {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;  // also its process group
  bool exited = false;
  int stopped_by = 0;  // the signal that stopped it while it is stopped, else 0
  std::string note;    // for the failure report: it was stopped and killed
  ExitStatus status;
  Stream out{-1, ForwardLines(1, "")};
  Stream err{-1, ForwardLines(2, "")};
  TailLines stderr_tail;
  bool Drained() const { return out.fd < 0 && err.fd < 0; }
};

// The first failure: a child that failed, or one that could not be started.
struct RootCause {
  Slot* slot = nullptr;
  std::string report;  // set directly for start failures
  int exit_code = 1;
  bool written = false;
  // When the failure was seen: torchrun ranks failures by it.
  std::chrono::system_clock::time_point when = std::chrono::system_clock::now();
};

class Loop {
 public:
  Loop(const SupervisorOptions& options, SignalChannel& signals,
       std::vector<std::pair<int, std::function<void()>>>& watches)
      : options_(options), signals_(signals), watches_(watches) {}

  int Run(std::vector<SupervisedChild> children);

 private:
  void Start(std::vector<SupervisedChild>& children);
  void OnSignals();
  void OnChildStatus(pid_t pid, int wait_status);
  void KillIfStopped(Slot& slot);
  std::string Who(const Slot& slot) const;
  void ReadStream(Stream& stream);
  void BeginStop(int signal, const std::string& why);
  void SignalGroups(int signal);
  bool AllExited() const;
  bool AllDrained() const;
  bool LeftoversRemain();
  void SignalLeftovers(int signal);
  void MaybeWriteFailure(bool at_end);
  int ExitCode() const;
  int PollTimeoutMs() const;

  const SupervisorOptions& options_;
  SignalChannel& signals_;
  std::vector<std::pair<int, std::function<void()>>>& watches_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::optional<RootCause> root_cause_;
  int stop_signal_ = 0;  // the signal that asked us to stop, 0 if none
  bool stopping_ = false;
  std::optional<Clock::time_point> kill_at_;  // SIGKILL for live children
  bool killed_ = false;
  std::optional<Clock::time_point> leftover_kill_at_;
  bool leftovers_killed_ = false;
  std::optional<Clock::time_point> give_up_at_;
  std::vector<char> buffer_ = std::vector<char>(1 << 20);
};

int Loop::Run(std::vector<SupervisedChild> children) {
  BecomeSubreaper();
  Start(children);
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (;;) {
    fds.clear();
    streams.clear();
    fds.push_back({signals_.fd(), POLLIN, 0});
    for (auto& watch : watches_)
      fds.push_back({watch.first, POLLIN, 0});
    for (auto& slot : slots_) {
      for (Stream* stream : {&slot->out, &slot->err}) {
        if (stream->fd < 0)
          continue;
        fds.push_back({stream->fd, POLLIN, 0});
        streams.push_back(stream);
      }
    }
    const int ready = poll(fds.data(), fds.size(), PollTimeoutMs());
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll");
    if (ready > 0) {
      // Output first, so a child's last words are in its tail before its exit is handled.
      const std::size_t first_stream = 1 + watches_.size();
      for (std::size_t i = 0; i < streams.size(); ++i) {
        if (fds[first_stream + i].revents != 0)
          ReadStream(*streams[i]);
      }
      for (std::size_t i = 0; i < watches_.size(); ++i) {
        if (fds[1 + i].revents != 0)
          watches_[i].second();
      }
      if (fds[0].revents != 0)
        OnSignals();
    }

    const auto now = Clock::now();
    if (kill_at_ && !killed_ && now >= *kill_at_) {
      LogLine(fmt::format("grace period of {} s is over; sending SIGKILL",
                          options_.grace.count() / 1000.0));
      SignalGroups(SIGKILL);
      killed_ = true;
    }
    MaybeWriteFailure(false);
    if (!AllExited())
      continue;

    if (!leftover_kill_at_) {
      leftover_kill_at_ = now + options_.leftover_grace;
      if (LeftoversRemain())
        SignalLeftovers(SIGTERM);
    }
    if (!leftovers_killed_ && now >= *leftover_kill_at_) {
      if (LeftoversRemain()) {
        LogLine("left-over processes did not exit after SIGTERM; sending SIGKILL");
        SignalLeftovers(SIGKILL);
      }
      leftovers_killed_ = true;
      give_up_at_ = now + std::chrono::seconds(2);
    }
    if (leftovers_killed_)
      SignalLeftovers(SIGKILL);  // newly reparented ones
    if (AllDrained() && !LeftoversRemain())
      break;
    if (give_up_at_ && now >= *give_up_at_) {
      LogLine("output pipes still open after every process was killed; not waiting for them");
      break;
    }
  }
  for (auto& slot : slots_) {
    for (Stream* stream : {&slot->out, &slot->err}) {
      if (stream->fd >= 0) {
        stream->forward.Finish();
        close(stream->fd);
        stream->fd = -1;
      }
    }
  }
  MaybeWriteFailure(true);
  return ExitCode();
}

void Loop::Start(std::vector<SupervisedChild>& children) {
  for (auto& child : children) {
    auto slot = std::make_unique<Slot>();
    slot->rank = child.rank;
    slot->local_rank = child.local_rank;
    const std::string prefix =
        options_.rank_prefix && child.rank != 0 ? fmt::format("[rank {}] ", child.rank) : "";
    try {
      const ChildProcess process = SpawnChild(child.spec);
      slot->pid = process.pid;
      slot->out = Stream{process.stdout_fd, ForwardLines(options_.stdout_fd, prefix), nullptr};
      slot->err = Stream{process.stderr_fd, ForwardLines(options_.stderr_fd, prefix), nullptr};
      slot->err.tail = &slot->stderr_tail;
      slots_.push_back(std::move(slot));
    } catch (const std::exception& error) {
      RootCause cause;
      cause.report = LimitReport(
          fmt::format("{} could not be started: {}\n",
                      DescribeRank(options_.host, child.rank, child.local_rank), error.what()));
      cause.exit_code = 127;  // what a shell reports for a program it cannot run
      LogLine(cause.report.substr(0, cause.report.size() - 1));
      root_cause_ = std::move(cause);
      BeginStop(SIGTERM, "a process could not be started");
      return;
    }
  }
}

void Loop::ReadStream(Stream& stream) {
  const ssize_t n = read(stream.fd, buffer_.data(), buffer_.size());
  if (n > 0) {
    const std::string_view data(buffer_.data(), static_cast<std::size_t>(n));
    if (stream.tail != nullptr)
      stream.tail->Consume(data);
    stream.forward.Consume(data);
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  stream.forward.Finish();
  close(stream.fd);
  stream.fd = -1;
}

void Loop::OnSignals() {
  for (int signal : signals_.ReadPending()) {
    if (signal == SIGCHLD) {
      ReapChildren([this](pid_t pid, int status) { OnChildStatus(pid, status); });
    } else {
      if (stop_signal_ == 0)
        stop_signal_ = signal;
      const int forward = SignalForwardedForStop(signal);
      if (stopping_) {
        LogLine(fmt::format("received {} again; forwarding {}", SignalName(signal),
                            SignalName(forward)));
        SignalGroups(forward);
      } else {
        BeginStop(forward, fmt::format("received {}", SignalName(signal)));
      }
    }
  }
}

void Loop::OnChildStatus(pid_t pid, int wait_status) {
  const auto it = std::find_if(slots_.begin(), slots_.end(),
                               [pid](const auto& slot) { return slot->pid == pid; });
  if (it == slots_.end())
    return;  // an orphan handed to us: reaped, nothing else to do
  Slot& slot = **it;
  if (WIFSTOPPED(wait_status)) {
    slot.stopped_by = WSTOPSIG(wait_status);
    LogLine(fmt::format("rank {} (local rank {}, pid {}) was stopped by signal {} ({})", slot.rank,
                        slot.local_rank, pid, SignalName(slot.stopped_by), slot.stopped_by));
    if (stopping_)
      KillIfStopped(slot);
    return;
  }
  if (WIFCONTINUED(wait_status)) {
    slot.stopped_by = 0;
    LogLine(
        fmt::format("rank {} (local rank {}, pid {}) continues", slot.rank, slot.local_rank, pid));
    return;
  }
  slot.exited = true;
  slot.stopped_by = 0;
  slot.status = ExitStatus::FromWaitStatus(wait_status);
  if (slot.status.Success())
    return;
  if (stopping_) {
    LogLine(fmt::format("rank {} (pid {}) {}", slot.rank, pid, slot.status.Describe()));
    return;
  }
  RootCause cause;
  cause.slot = &slot;
  cause.exit_code = slot.status.ShellCode();
  root_cause_ = std::move(cause);
  BeginStop(SIGTERM, fmt::format("rank {} (pid {}) {}", slot.rank, pid, slot.status.Describe()));
}

void Loop::KillIfStopped(Slot& slot) {
  if (slot.exited || slot.stopped_by == 0 || !slot.note.empty())
    return;
  LogLine(
      fmt::format("rank {} (local rank {}, pid {}) is stopped and cannot act on SIGTERM; "
                  "sending SIGKILL",
                  slot.rank, slot.local_rank, slot.pid));
  slot.note = fmt::format("{} was stopped by signal {} ({}) and did not continue; it was killed",
                          Who(slot), SignalName(slot.stopped_by), slot.stopped_by);
  kill(-slot.pid, SIGKILL);
}

std::string Loop::Who(const Slot& slot) const {
  return DescribeRank(options_.host, slot.rank, slot.local_rank);
}

void Loop::BeginStop(int signal, const std::string& why) {
  stopping_ = true;
  const bool anyone_running = !AllExited();
  if (anyone_running) {
    LogLine(fmt::format("{}; sending {} to every process, SIGKILL after {} s", why,
                        SignalName(signal), options_.grace.count() / 1000.0));
  } else {
    LogLine(why);
  }
  SignalGroups(signal);
  for (auto& slot : slots_)
    KillIfStopped(*slot);
  kill_at_ = Clock::now() + options_.grace;
}

void Loop::SignalGroups(int signal) {
  for (auto& slot : slots_) {
    // Exited children's groups too: their descendants may still run.
    if (slot->pid > 0)
      kill(-slot->pid, signal);
  }
}

bool Loop::AllExited() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot->exited; });
}

bool Loop::AllDrained() const {
  return std::all_of(slots_.begin(), slots_.end(),
                     [](const auto& slot) { return slot->Drained(); });
}

bool Loop::LeftoversRemain() {
  for (auto& slot : slots_) {
    if (slot->pid > 0 && kill(-slot->pid, 0) == 0)
      return true;
  }
  // Orphans handed to us are our children: with none at all, skip the /proc scan.
  siginfo_t info{};
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD)
    return false;
  return !LiveChildrenOf(getpid()).empty();
}

void Loop::SignalLeftovers(int signal) {
  SignalGroups(signal);
  for (pid_t pid : LiveChildrenOf(getpid())) {
    kill(pid, signal);
    // An orphan that made its own group takes its children with it.
    if (getpgid(pid) == pid)
      kill(-pid, signal);
  }
}

void Loop::MaybeWriteFailure(bool at_end) {
  if (!root_cause_ || root_cause_->written ||
      (options_.failure_file.empty() && options_.torchelastic_error_file.empty())) {
    return;
  }
  RootCause& cause = *root_cause_;
  if (cause.slot != nullptr) {
    if (!cause.slot->Drained() && !at_end)
      return;  // its last stderr lines may still come
    std::vector<std::string> notes;
    for (const auto& slot : slots_) {
      if (!slot->note.empty())
        notes.push_back(slot->note);
    }
    cause.report = FormatChildFailure(Who(*cause.slot), cause.slot->status,
                                      cause.slot->stderr_tail.Text(), notes);
  }
  cause.written = true;
  if (!options_.failure_file.empty())
    WriteFailureOnce(options_.failure_file, cause.report);
  if (!options_.torchelastic_error_file.empty())
    WriteTorchelasticErrorFile(options_.torchelastic_error_file, cause.report, cause.when);
}

int Loop::ExitCode() const {
  if (root_cause_)
    return root_cause_->exit_code;
  if (stop_signal_ != 0) {
    const bool all_clean = std::all_of(slots_.begin(), slots_.end(),
                                       [](const auto& slot) { return slot->status.Success(); });
    return all_clean ? 0 : 128 + stop_signal_;
  }
  return 0;
}

int Loop::PollTimeoutMs() const {
  if (AllExited())
    return 50;  // the end phase polls /proc for left-overs
  if (kill_at_ && !killed_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at_ - Clock::now());
    return static_cast<int>(std::clamp<long>(left.count(), 0, 1000));
  }
  return 1000;
}

}  // namespace

Supervisor::Supervisor(SupervisorOptions options, SignalChannel& signals)
    : options_(std::move(options)), signals_(signals) {}

void Supervisor::Watch(int fd, std::function<void()> on_readable) {
  watches_.emplace_back(fd, std::move(on_readable));
}

int Supervisor::Run(std::vector<SupervisedChild> children) {
  Loop loop(options_, signals_, watches_);
  return loop.Run(std::move(children));
}

}  // namespace mrcnn::entrypoint
