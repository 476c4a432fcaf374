#pragma once
// At the end of a run that was not stopped, rank 0 writes the model dir (weights,
// resolved config, class names: what serving reads) through `write_model_dir`, and every
// rank waits at `barrier`, so the job ends only when rank 0's checkpoint, evaluation and
// model dir are done. Register it last. Torch-free.
#include <functional>

#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class ModelExportHook : public HookBase {
 public:
  // `write_model_dir` empty on ranks other than 0; `barrier` empty with one process.
  ModelExportHook(std::function<void()> write_model_dir, std::function<void()> barrier);
  void AfterTrain(TrainerBase& trainer) override;
  std::string name() const override { return "ModelExport"; }

 private:
  std::function<void()> write_model_dir_;
  std::function<void()> barrier_;
};

}  // namespace mrcnn::engine
