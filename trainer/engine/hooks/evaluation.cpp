#include "trainer/engine/hooks/evaluation.h"

namespace mrcnn::engine {

EvaluationHook::EvaluationHook(int64_t period, Evaluate evaluate, std::function<void()> barrier)
    : period_(period), evaluate_(std::move(evaluate)), barrier_(std::move(barrier)) {}

void EvaluationHook::Run(TrainerBase& trainer, int64_t completed) {
  if (!evaluate_)
    return;
  EvaluationOutput out = evaluate_(completed);
  for (auto& event : out.metrics)
    trainer.storage().PutEvaluation(std::move(event));
  for (auto& image : out.images)
    trainer.storage().PutImage(std::move(image));
}

void EvaluationHook::AfterStep(TrainerBase& trainer) {
  const int64_t done = trainer.done();
  if (period_ <= 0 || done % period_ != 0 || trainer.is_last_iteration() || trainer.stopping())
    return;
  Run(trainer, done);
  if (barrier_)
    barrier_();  // the others wait while rank 0 evaluates
}

void EvaluationHook::AfterTrain(TrainerBase& trainer) {
  if (!trainer.stopping())
    Run(trainer, trainer.max_iter());
}

}  // namespace mrcnn::engine
