#include "trainer/engine/hooks/periodic_writer.h"

#include <algorithm>

#include "trainer/engine/hooks/periodic_checkpointer.h"

namespace mrcnn::engine {

PeriodicWriterHook::PeriodicWriterHook(std::vector<std::unique_ptr<EventWriter>> writers,
                                       int64_t period)
    : writers_(std::move(writers)), period_(std::max<int64_t>(1, period)) {}

void PeriodicWriterHook::WriteEvaluationsAndMedia(TrainerBase& trainer) {
  EventStorage& storage = trainer.storage();
  for (auto& w : writers_) {
    w->WriteEvaluations(storage);
    w->WriteMedia(storage);
  }
  storage.ClearMedia();
}

void PeriodicWriterHook::AfterStep(TrainerBase& trainer) {
  const EventStorage& s = trainer.storage();
  const bool checkpointed =
      s.Has(kCheckpointSaved) && s.History(kCheckpointSaved).LatestIteration() == s.iteration();
  if (trainer.done() % period_ == 0 || trainer.is_last_iteration() || trainer.stopping() ||
      checkpointed) {
    trainer.FlushDeferred();
    for (auto& w : writers_)
      w->WriteTraining(trainer.storage());
  }
  WriteEvaluationsAndMedia(trainer);
}

void PeriodicWriterHook::AfterTrain(TrainerBase& trainer) {
  WriteEvaluationsAndMedia(trainer);
  for (auto& w : writers_)
    w->Close();
}

}  // namespace mrcnn::engine
