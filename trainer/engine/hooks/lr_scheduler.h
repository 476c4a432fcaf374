#pragma once
// Sets the learning rate of each iteration before its step (LrSchedule is a pure
// function of the iteration, so resuming needs nothing else) and puts it into "lr".
// Torch-free: `apply` is what hands the rate to the optimizer.
#include <functional>

#include "trainer/engine/solver/lr_schedule.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class LrSchedulerHook : public HookBase {
 public:
  LrSchedulerHook(LrSchedule schedule, std::function<void(double)> apply);
  void BeforeStep(TrainerBase& trainer) override;
  std::string name() const override { return "LrScheduler"; }

 private:
  LrSchedule schedule_;
  std::function<void(double)> apply_;
};

}  // namespace mrcnn::engine
