#pragma once
// Starting one supervised child: its own process group (so a signal reaches
// everything it starts), stdout and stderr on pipes we read, default signal
// dispositions and an empty signal mask whatever the supervisor blocked, and
// SIGKILL when the supervisor dies (PR_SET_PDEATHSIG), so no child outlives it.
#include <sys/types.h>

#include <string>
#include <vector>

namespace mrcnn::entrypoint {

struct ChildSpec {
  // argv[0] is the program: a path, or a bare name looked up on PATH. The
  // arguments are passed as they are; no shell ever sees them.
  std::vector<std::string> argv;
  // The complete environment, "KEY=VALUE" each.
  std::vector<std::string> env;
  // Working directory of the child; empty = the supervisor's.
  std::string working_dir;
};

struct ChildProcess {
  pid_t pid = -1;      // also the process group id
  int stdout_fd = -1;  // read ends, non-blocking, close-on-exec
  int stderr_fd = -1;
};

// Throws std::system_error naming the program when it cannot be started
// (missing, not executable, no pipes left).
ChildProcess SpawnChild(const ChildSpec& spec);

// The signals the supervisor takes over (blocked and read through a signalfd)
// and restores to their defaults in children.
const std::vector<int>& SupervisedSignals();

}  // namespace mrcnn::entrypoint
