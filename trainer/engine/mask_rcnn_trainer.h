#pragma once
// Mask R-CNN's run_step for TrainerBase: `accumulation` micro-batches from the loader,
// each through TrainStep::ForwardBackward with its images' sampling generators, then
// TrainStep::Finish (all-reduce, unscale, clip, optimizer step). It puts into the event
// store: every loss and "total_loss" (means over the micro-batches, then over the ranks),
// "data_time" (seconds waiting for the loader), "max_mem_mb" (peak memory, see
// PeakMemoryMb) and, with fp16 loss scaling, "amp/loss_scale" (read with the losses).
//
// The losses stay on the device until FlushDeferred (the writers call it at every logging
// iteration, the checkpointer before each save): then one copy brings the whole window to
// the host, each iteration's values are put at their own iteration, and a non-finite loss
// stops the job with TrainStep::CheckFinite's message naming the iteration it appeared at
// (with fp16 loss scaling, a scale that fell below TrainStep::kMinLossScale does,
// TrainStep::CheckLossScale).
// Iterations in between read nothing from the device.
#include <cstdint>
#include <vector>

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
  // `read_period` (SOLVER.LOG_PERIOD, the writers' period; 0: never): the step reads the
  // window itself at the end of every iteration whose done() it divides, and of the last
  // one, so the wait for the device falls inside the iteration's time (the step waits for
  // nothing else, see TrainStep::Finish) rather than between iterations.
  MaskRcnnTrainer(EventStorage storage, TrainStep& step, data::DataLoader& loader,
                  TrainingState& state, const c10::Device& device, int64_t accumulation,
                  int64_t read_period);

  void FlushDeferred() override;

 protected:
  void RunStep() override;

 private:
  // One iteration's losses, one entry per micro-batch, not yet read.
  struct PendingLosses {
    int64_t iteration;
    std::vector<MicroBatchLosses> micro;
    at::Tensor loss_scale;  // fp16: the scale after the step (float32 [1]); else undefined
  };
  std::vector<PendingLosses> pending_;
  TrainStep& step_;
  data::DataLoader& loader_;
  TrainingState& state_;
  c10::Device device_;
  int64_t accumulation_;
  int64_t read_period_;
};

}  // namespace mrcnn::engine
