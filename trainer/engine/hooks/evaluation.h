#pragma once
// COCO evaluation every `period` iterations (not at the last one) and at the end of a
// run that was not stopped. Rank 0 evaluates (its `evaluate` is set) and puts the
// results (metrics and images) into the storage, where the writers pick them up; the other ranks
// wait at `barrier` during periodic evaluations (the job's final barrier covers the last one).
// Register it only when there is a val/test channel. Torch-free.
#include <cstdint>
#include <functional>
#include <vector>

#include "trainer/engine/events/event_storage.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

// What one evaluation produces: COCO numbers per IoU type, and pictures of predictions.
struct EvaluationOutput {
  std::vector<EvaluationEvent> metrics;
  std::vector<ImageEvent> images;
};

class EvaluationHook : public HookBase {
 public:
  // Evaluates the model as of `completed_iterations`.
  using Evaluate = std::function<EvaluationOutput(int64_t completed_iterations)>;
  // period <= 0: only at the end. `evaluate` empty on ranks that don't evaluate.
  EvaluationHook(int64_t period, Evaluate evaluate, std::function<void()> barrier);
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "Evaluation"; }

 private:
  void Run(TrainerBase& trainer, int64_t completed);
  int64_t period_;
  Evaluate evaluate_;
  std::function<void()> barrier_;
};

}  // namespace mrcnn::engine
