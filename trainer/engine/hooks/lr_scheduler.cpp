#include "trainer/engine/hooks/lr_scheduler.h"

namespace mrcnn::engine {

LrSchedulerHook::LrSchedulerHook(LrSchedule schedule, std::function<void(double)> apply)
    : schedule_(std::move(schedule)), apply_(std::move(apply)) {}

void LrSchedulerHook::BeforeStep(TrainerBase& trainer) {
  const double lr = schedule_.LrAt(trainer.iter());
  apply_(lr);
  trainer.storage().PutScalar("lr", lr);
}

}  // namespace mrcnn::engine
