#pragma once
// Times each iteration (from the first BeforeStep to this hook's AfterStep: the step,
// the other hooks' BeforeStep and the cross-rank sync) into "time", and the ETA from the
// average over this run into "eta_seconds". At the end of a run that was not stopped it
// logs "[train] done: N iterations in H:MM:SS (this run)". Register it first, so its
// BeforeStep runs before every other hook's. Torch-free.
#include <chrono>
#include <functional>

#include "trainer/engine/events/console_log.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class IterationTimerHook : public HookBase {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `clock`: for tests; default steady_clock::now.
  explicit IterationTimerHook(ConsoleLog log, Clock clock = {});
  void BeforeTrain(TrainerBase& trainer) override;
  void BeforeStep(TrainerBase& trainer) override;
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "IterationTimer"; }

 private:
  ConsoleLog log_;
  Clock clock_;
  std::chrono::steady_clock::time_point run_start_, step_start_;
};

}  // namespace mrcnn::engine
