#pragma once
// SIGTERM (SageMaker's stop, a spot interruption, the entrypoint forwarding either) and
// SIGINT end training cleanly: the ranks agree on one iteration through the storage's
// rank vote "stop_requested" (the signal reaches them at different moments), the
// checkpointer saves that iteration, rank 0 logs "[train] stop requested: saved
// iteration N, exiting" and the loop ends; the process exits 0 and a restart resumes
// there. Register it after the PeriodicCheckpointerHook it saves through. Torch-free.
#include <atomic>
#include <functional>

#include "trainer/engine/events/console_log.h"
#include "trainer/engine/hooks/periodic_checkpointer.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

// Set by the SIGTERM/SIGINT handler.
std::atomic<bool>& StopRequested();
void InstallStopHandlers();

class StopSignalHook : public HookBase {
 public:
  // `local_request`: whether this process was asked to stop (default: StopRequested()).
  StopSignalHook(PeriodicCheckpointerHook& checkpointer, ConsoleLog log,
                 std::function<bool()> local_request = {});
  void BeforeTrain(TrainerBase& trainer) override;
  void AfterStep(TrainerBase& trainer) override;
  std::string name() const override { return "StopSignal"; }

 private:
  PeriodicCheckpointerHook& checkpointer_;
  ConsoleLog log_;
  std::function<bool()> local_request_;
};

}  // namespace mrcnn::engine
