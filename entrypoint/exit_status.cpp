#include "entrypoint/exit_status.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstring>

namespace mrcnn::entrypoint {

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFSIGNALED(wait_status)) {
    status.signaled = true;
    status.signal = WTERMSIG(wait_status);
  } else if (WIFEXITED(wait_status)) {
    status.code = WEXITSTATUS(wait_status);
  }
  return status;
}

std::string ExitStatus::Describe() const {
  if (signaled)
    return fmt::format("was killed by signal {} ({})", SignalName(signal), signal);
  return fmt::format("exited with code {}", code);
}

std::string SignalName(int signal) {
  if (const char* abbrev = sigabbrev_np(signal))
    return fmt::format("SIG{}", abbrev);
  return fmt::format("signal {}", signal);
}

}  // namespace mrcnn::entrypoint
