#include "entrypoint/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
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

// posix_spawn objects with destructors, so every exit path frees them.
struct SpawnAttributes {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnAttributes() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

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

  SpawnAttributes spawn;
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal : SupervisedSignals())
    sigaddset(&defaults, signal);
  sigaddset(&defaults, SIGPIPE);  // the supervisor ignores it; children must not inherit that
  posix_spawnattr_setsigmask(&spawn.attr, &empty);
  posix_spawnattr_setsigdefault(&spawn.attr, &defaults);
  posix_spawnattr_setpgroup(&spawn.attr, 0);
  posix_spawnattr_setflags(&spawn.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_adddup2(&spawn.actions, out.write_end, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&spawn.actions, err.write_end, STDERR_FILENO);
  if (!spec.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&spawn.actions, spec.working_dir.c_str());
  }

  std::vector<char*> argv;
  for (const auto& arg : spec.argv)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& entry : spec.env)
    envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  // posix_spawnp searches PATH only for names without a slash, like execvp.
  const int rc = posix_spawnp(&pid, argv[0], &spawn.actions, &spawn.attr, argv.data(), envp.data());
  CloseIfOpen(out.write_end);
  CloseIfOpen(err.write_end);
  if (rc != 0) {
    CloseIfOpen(out.read_end);
    CloseIfOpen(err.read_end);
    throw std::system_error(rc, std::generic_category(),
                            fmt::format("cannot start \"{}\"", spec.argv.front()));
  }
  return ChildProcess{pid, out.read_end, err.read_end};
}

}  // namespace mrcnn::entrypoint
