#include "entrypoint/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <system_error>

namespace mrcnn::entrypoint {
namespace {

// Bigger pipes mean fewer wake-ups per megabyte when children log fast.
// Best effort: the kernel caps it at /proc/sys/fs/pipe-max-size.
constexpr int kPipeBytes = 1 << 20;

struct Pipe {
  int read_end = -1;
  int write_end = -1;
};

Pipe MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  fcntl(fds[0], F_SETPIPE_SZ, kPipeBytes);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return {fds[0], fds[1]};
}

void CloseIfOpen(int& fd) {
  if (fd >= 0)
    close(fd);
  fd = -1;
}

// Reports why the child could not run its program (errno of the failed call)
// through a close-on-exec pipe: a successful exec closes it with nothing written.
struct StartError {
  int stage;  // 0: working directory, 1: exec
  int error;
};

// Runs in the forked child: only system calls, no allocation, then exec or _exit.
[[noreturn]] void BecomeChild(const ChildSpec& spec, char* const* argv, char* const* envp,
                              const Pipe& out, const Pipe& err, int report_fd, pid_t supervisor) {
  setpgid(0, 0);
  // A child never outlives its supervisor: if the supervisor dies (SIGKILL, OOM), the
  // children die with it, as they would with a container's PID 1, instead of training
  // on unsupervised with nobody to read their output or stop them.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor)
    _exit(127);  // the supervisor died before the line above took effect
  for (int signal : SupervisedSignals())
    std::signal(signal, SIG_DFL);
  std::signal(SIGPIPE, SIG_DFL);  // the supervisor ignores it; children must not inherit that
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  dup2(out.write_end, STDOUT_FILENO);
  dup2(err.write_end, STDERR_FILENO);
  StartError failure{0, 0};
  if (!spec.working_dir.empty() && chdir(spec.working_dir.c_str()) != 0) {
    failure = {0, errno};
  } else {
    // execvpe searches the supervisor's PATH for names without a slash, like execvp.
    execvpe(argv[0], argv, envp);
    failure = {1, errno};
  }
  [[maybe_unused]] const ssize_t n = write(report_fd, &failure, sizeof(failure));
  _exit(127);
}

}  // namespace

const std::vector<int>& SupervisedSignals() {
  static const std::vector<int> signals = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
  return signals;
}

ChildProcess SpawnChild(const ChildSpec& spec) {
  if (spec.argv.empty())
    throw std::invalid_argument("SpawnChild: empty argv");
  Pipe out = MakePipe();
  Pipe err;
  try {
    err = MakePipe();
  } catch (...) {
    CloseIfOpen(out.read_end);
    CloseIfOpen(out.write_end);
    throw;
  }

  std::vector<char*> argv;
  for (const auto& arg : spec.argv)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& entry : spec.env)
    envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int error = errno;
    for (int* fd : {&out.read_end, &out.write_end, &err.read_end, &err.write_end})
      CloseIfOpen(*fd);
    throw std::system_error(error, std::generic_category(), "pipe2");
  }
  // fork, not posix_spawn: only a forked child can ask for PR_SET_PDEATHSIG before exec.
  const pid_t supervisor = getpid();
  const pid_t pid = fork();
  if (pid == 0)
    BecomeChild(spec, argv.data(), envp.data(), out, err, report[1], supervisor);
  const int fork_error = errno;
  close(report[1]);
  CloseIfOpen(out.write_end);
  CloseIfOpen(err.write_end);
  StartError failure{0, 0};
  ssize_t n = -1;
  if (pid > 0) {
    setpgid(pid, pid);  // also here, so a signal to the group right after we return reaches it
    do {
      n = read(report[0], &failure, sizeof(failure));
    } while (n < 0 && errno == EINTR);
  }
  close(report[0]);
  if (pid < 0 || n == static_cast<ssize_t>(sizeof(failure))) {
    CloseIfOpen(out.read_end);
    CloseIfOpen(err.read_end);
    if (pid > 0)
      waitpid(pid, nullptr, 0);
    if (pid < 0)
      throw std::system_error(fork_error, std::generic_category(), "fork");
    if (failure.stage == 0) {
      throw std::system_error(
          failure.error, std::generic_category(),
          fmt::format("cannot start \"{}\" in \"{}\"", spec.argv.front(), spec.working_dir));
    }
    throw std::system_error(failure.error, std::generic_category(),
                            fmt::format("cannot start \"{}\"", spec.argv.front()));
  }
  return ChildProcess{pid, out.read_end, err.read_end};
}

}  // namespace mrcnn::entrypoint
