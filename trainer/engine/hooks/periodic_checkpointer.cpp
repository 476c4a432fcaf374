#include "trainer/engine/hooks/periodic_checkpointer.h"

namespace mrcnn::engine {

PeriodicCheckpointerHook::PeriodicCheckpointerHook(CheckpointSaver& saver, int64_t period,
                                                   std::function<void()> barrier)
    : saver_(saver), period_(period), barrier_(std::move(barrier)) {}

void PeriodicCheckpointerHook::SaveNow(TrainerBase& trainer, int64_t completed) {
  if (completed == last_saved_)
    return;
  // A kept-back non-finite loss must stop the job before its weights are saved.
  trainer.FlushDeferred();
  saver_.Save(completed);
  last_saved_ = completed;
  trainer.storage().PutScalar(kCheckpointSaved, static_cast<double>(completed));
  if (barrier_)
    barrier_();  // the others wait while rank 0 writes
}

void PeriodicCheckpointerHook::AfterStep(TrainerBase& trainer) {
  const int64_t done = trainer.done();
  if (period_ > 0 && done % period_ == 0 && !trainer.is_last_iteration())
    SaveNow(trainer, done);
}

void PeriodicCheckpointerHook::AfterTrain(TrainerBase& trainer) {
  // No barrier: the job's final barrier (ModelExportHook) waits for rank 0 anyway.
  if (!trainer.stopping() && trainer.start_iter() < trainer.max_iter() &&
      last_saved_ != trainer.max_iter()) {
    saver_.Save(trainer.max_iter());
    last_saved_ = trainer.max_iter();
  }
}

}  // namespace mrcnn::engine
