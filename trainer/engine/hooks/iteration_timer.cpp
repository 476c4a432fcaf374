#include "trainer/engine/hooks/iteration_timer.h"

#include <string>

#include "trainer/engine/events/log_format.h"

namespace mrcnn::engine {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

IterationTimerHook::IterationTimerHook(ConsoleLog log, Clock clock)
    : log_(log),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}

void IterationTimerHook::BeforeTrain(TrainerBase&) {
  run_start_ = clock_();
}

void IterationTimerHook::BeforeStep(TrainerBase&) {
  step_start_ = clock_();
}

void IterationTimerHook::AfterStep(TrainerBase& trainer) {
  const auto now = clock_();
  trainer.storage().PutScalar("time", Seconds(step_start_, now));
  const double per_iter =
      Seconds(run_start_, now) / static_cast<double>(trainer.done() - trainer.start_iter());
  trainer.storage().PutScalar("eta_seconds",
                              per_iter * static_cast<double>(trainer.max_iter() - trainer.done()));
}

void IterationTimerHook::AfterTrain(TrainerBase& trainer) {
  if (trainer.stopping())
    return;
  log_.Line("[train] done: " + std::to_string(trainer.max_iter()) + " iterations in " +
            FormatDuration(Seconds(run_start_, clock_())) + " (this run)");
}

}  // namespace mrcnn::engine
