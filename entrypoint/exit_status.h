#pragma once
// What a wait() status means for the job: the exit code we pass on and the
// words a person reads in output/failure.
#include <string>

namespace mrcnn::entrypoint {

struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code when !signaled
  int signal = 0;  // terminating signal when signaled

  static ExitStatus FromWaitStatus(int wait_status);
  bool Success() const { return !signaled && code == 0; }
  // The code a shell would report: the exit code, or 128 + signal.
  int ShellCode() const { return signaled ? 128 + signal : code; }
  // "exited with code 3" / "was killed by signal SIGSEGV (11)".
  std::string Describe() const;
};

// "SIGSEGV" for 11; "signal 77" for numbers without a name.
std::string SignalName(int signal);

}  // namespace mrcnn::entrypoint
