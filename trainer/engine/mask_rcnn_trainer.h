#pragma once
// Mask R-CNN's run_step for TrainerBase: `accumulation` micro-batches from the loader,
// each through TrainStep::ForwardBackward with its images' sampling generators, then
// TrainStep::Finish (all-reduce, unscale, clip, optimizer step). It puts into the event
// store: every loss and "total_loss" (means over the micro-batches, then over the ranks),
// "data_time" (seconds waiting for the loader), "max_mem_mb" (peak memory, see
// PeakMemoryMb) and, with fp16 loss scaling, "amp/loss_scale".
#include <cstdint>

#include "trainer/engine/checkpoint/training_checkpointer.h"
#include "trainer/engine/train_step.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::data {
class DataLoader;
}

namespace mrcnn::engine {

// Peak memory for the log's max_mem field, in MiB. On CUDA: the caching allocator's peak
// of bytes handed to tensors on this device (torch.cuda.max_memory_allocated, what
// Detectron2 and torchvision's reference scripts print). On CPU: the process's peak
// resident set size, which includes the dataset and the loader's buffers: what a CPU job
// needs from the machine.
double PeakMemoryMb(const c10::Device& device);

class MaskRcnnTrainer : public TrainerBase {
 public:
  // Keeps references to all; puts the model in training mode. `state.batches_consumed`
  // counts the loader's batches as they are taken (the checkpoint's resume position).
  MaskRcnnTrainer(EventStorage storage, TrainStep& step, data::DataLoader& loader,
                  TrainingState& state, const c10::Device& device, int64_t accumulation);

 protected:
  void RunStep() override;

 private:
  TrainStep& step_;
  data::DataLoader& loader_;
  TrainingState& state_;
  c10::Device device_;
  int64_t accumulation_;
};

}  // namespace mrcnn::engine
