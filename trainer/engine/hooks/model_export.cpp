#include "trainer/engine/hooks/model_export.h"

namespace mrcnn::engine {

ModelExportHook::ModelExportHook(std::function<void()> write_model_dir,
                                 std::function<void()> barrier)
    : write_model_dir_(std::move(write_model_dir)), barrier_(std::move(barrier)) {}

void ModelExportHook::AfterTrain(TrainerBase& trainer) {
  if (trainer.stopping())
    return;
  if (write_model_dir_)
    write_model_dir_();
  if (barrier_)
    barrier_();
}

}  // namespace mrcnn::engine
