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

// Without blocking, reaps every exited child and collects every stop and
// continue of a child (WUNTRACED, WCONTINUED: a stopped child cannot act on
// SIGTERM, so the supervisor must know). Calls on_status(pid, wait_status) for
// each, signal deaths before exits with a code: when a killed process and a
// peer that lost its connection to it are collected together, the killed one
// is the likelier root cause. Returns the number of events.
template <typename OnStatus>
int ReapChildren(OnStatus&& on_status);

}  // namespace mrcnn::entrypoint

#include <sys/wait.h>

#include <algorithm>
#include <utility>

template <typename OnStatus>
int mrcnn::entrypoint::ReapChildren(OnStatus&& on_status) {
  std::vector<std::pair<pid_t, int>> events;
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid <= 0)
      break;  // 0: children left but none changed; -1: ECHILD
    events.emplace_back(pid, status);
  }
  std::stable_partition(events.begin(), events.end(),
                        [](const auto& event) { return WIFSIGNALED(event.second); });
  for (const auto& [pid, status] : events)
    on_status(pid, status);
  return static_cast<int>(events.size());
}
