#pragma once
// Processes the supervisor is responsible for beyond its direct children:
// orphaned grandchildren. As PID 1 the kernel hands them to us anyway; otherwise
// we ask for them with PR_SET_CHILD_SUBREAPER.
#include <sys/types.h>

#include <vector>

namespace mrcnn::entrypoint {

// Makes orphaned descendants our children instead of init's. No-op (true) as PID 1.
bool BecomeSubreaper();

// Live (non-zombie) processes whose parent is `parent`, from /proc.
std::vector<pid_t> LiveChildrenOf(pid_t parent);

// Reaps every exited child without blocking; calls on_exit(pid, wait_status)
// for each. Returns the number reaped.
template <typename OnExit>
int ReapExited(OnExit&& on_exit);

}  // namespace mrcnn::entrypoint

#include <sys/wait.h>

template <typename OnExit>
int mrcnn::entrypoint::ReapExited(OnExit&& on_exit) {
  int reaped = 0;
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0)
      return reaped;  // 0: children left but none exited; -1: ECHILD
    ++reaped;
    on_exit(pid, status);
  }
}
