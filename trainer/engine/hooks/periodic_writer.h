#pragma once
// Runs the event writers: the training window every `period` iterations, at the last
// iteration, at a checkpoint and at the iteration a stop was agreed (a resumed run starts
// after its checkpoint, so nothing logged is lost); new
// evaluations and media at every step and at the end. Register it after every hook that
// puts numbers (Detectron2 keeps its PeriodicWriter last for the same reason). Writers
// exist on rank 0 only; other ranks give none. Torch-free.
#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/engine/events/event_writer.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class PeriodicWriterHook : public HookBase {
 public:
  // period < 1 is taken as 1.
  PeriodicWriterHook(std::vector<std::unique_ptr<EventWriter>> writers, int64_t period);
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "PeriodicWriter"; }

 private:
  void WriteEvaluationsAndMedia(TrainerBase& trainer);
  std::vector<std::unique_ptr<EventWriter>> writers_;
  int64_t period_;
};

}  // namespace mrcnn::engine
