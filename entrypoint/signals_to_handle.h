#pragma once
// TORCHELASTIC_SIGNALS_TO_HANDLE: the signals torchrun's agent turns into a shutdown
// ("SIGTERM,SIGINT,SIGHUP,SIGQUIT" when unset) and sends on to its workers. Under torchrun
// the entrypoint is such a worker, so each of them must stop the job as SIGTERM does
// instead of killing the supervisor by their default action (SIGQUIT would dump core and
// orphan the trainer). Names are torch's: Python's `signal` module names ("SIGUSR1").
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::entrypoint {

struct SignalsToHandle {
  // Signals beyond SIGTERM/SIGINT/SIGHUP (always handled) to treat as a stop request.
  std::vector<int> extra;
  // One line per name that was skipped (unknown, uncatchable, or one the supervisor needs
  // for itself), as torch's agent only warns about those too.
  std::vector<std::string> warnings;
};

SignalsToHandle ParseSignalsToHandle(std::string_view list);

// SIGTERM, SIGINT and SIGHUP reach the children as they are; any other stop signal as
// SIGTERM, which is what the trainer (and most programs) checkpoint and exit on.
int SignalForwardedForStop(int received);

}  // namespace mrcnn::entrypoint
