#pragma once
// Checkpoints every `period` iterations (not at the last one: the end of training saves
// that) and once more at the end of a run that trained and was not stopped. Each save puts
// "checkpoint/saved" (the completed iterations) into the store, so the writers write what
// they hold up to that point: a run killed later resumes there, and nothing logged before
// the checkpoint is lost. After a
// periodic save every rank waits at `barrier` while rank 0 writes. SaveNow is how other
// hooks (the stop signal) save outside the period; an iteration is never saved twice.
// Resuming is the checkpointer's (TrainingCheckpointer::ResumeOrLoad, before Train).
// Torch-free.
#include <cstdint>
#include <functional>

#include "trainer/engine/checkpoint/checkpoint_saver.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

// The store's scalar marking the iterations a checkpoint was saved at.
inline constexpr const char* kCheckpointSaved = "checkpoint/saved";

class PeriodicCheckpointerHook : public HookBase {
 public:
  // period <= 0: no periodic saves. `barrier` empty: one process.
  PeriodicCheckpointerHook(CheckpointSaver& saver, int64_t period, std::function<void()> barrier);
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "PeriodicCheckpointer"; }

  // Saves `completed` (unless already saved) and waits at the barrier.
  void SaveNow(TrainerBase& trainer, int64_t completed);

 private:
  CheckpointSaver& saver_;
  int64_t period_;
  std::function<void()> barrier_;
  int64_t last_saved_ = -1;
};

}  // namespace mrcnn::engine
