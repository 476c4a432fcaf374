#pragma once
// Checkpoints every `period` iterations (not at the last one: the end of training saves
// that) and once more at the end of a run that trained and was not stopped. After a
// periodic save every rank waits at `barrier` while rank 0 writes. SaveNow is how other
// hooks (the stop signal) save outside the period; an iteration is never saved twice.
// Resuming is the checkpointer's (TrainingCheckpointer::ResumeOrLoad, before Train).
// Torch-free.
#include <cstdint>
#include <functional>

#include "trainer/engine/checkpoint/checkpoint_saver.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class PeriodicCheckpointerHook : public HookBase {
 public:
  // period <= 0: no periodic saves. `barrier` empty: one process.
  PeriodicCheckpointerHook(CheckpointSaver& saver, int64_t period, std::function<void()> barrier);
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "PeriodicCheckpointer"; }

  // Saves `completed` (unless already saved) and waits at the barrier.
  void SaveNow(int64_t completed);

 private:
  CheckpointSaver& saver_;
  int64_t period_;
  std::function<void()> barrier_;
  int64_t last_saved_ = -1;
};

}  // namespace mrcnn::engine
