#pragma once
// The training state in a checkpoint and back: model weights and buffers ("model/*"),
// the optimizer's state, the loss scaler, the random generators, the run's seed and the
// number of loader batches consumed (so a resumed run draws the same batches, anchors and
// RoIs as an uninterrupted one, bit for bit).
//
// ResumeOrLoad runs once before training (and for eval-only); Save is what
// PeriodicCheckpointerHook and StopSignalHook call. In a data-parallel job rank 0 writes,
// and on resume every rank checks that it resumes at rank 0's position, then takes rank
// 0's weights, buffers and optimizer state.
#include <cstdint>
#include <optional>

#include "trainer/engine/checkpoint/checkpoint.h"
#include "trainer/engine/checkpoint/checkpoint_saver.h"
#include "trainer/engine/events/console_log.h"

namespace mrcnn::model {
class MetaArchitecture;
}

namespace mrcnn::engine {

namespace dist {
class DataParallel;
}
class GradScaler;
class Optimizer;

// What a checkpoint holds, by reference; `seed` and `batches_consumed` are updated by
// the trainer as it runs and restored by a resume.
struct TrainingState {
  model::MetaArchitecture& net;
  Optimizer& optimizer;
  GradScaler& scaler;
  int64_t seed = 0;
  int64_t batches_consumed = 0;
};

class TrainingCheckpointer : public CheckpointSaver {
 public:
  // Keeps references to all; they must outlive it.
  TrainingCheckpointer(CheckpointDir dir, TrainingState& state, dist::DataParallel& dp,
                       ConsoleLog log);

  // Loads the newest valid checkpoint unless `resume` is false (invalid ones are skipped
  // with a warning). With none, the run starts from the model's initial weights (as
  // Detectron2's resume_or_load: `resume` true says so in the log). For eval-only only the
  // model is loaded. Returns the iteration to start from (0 when nothing was resumed).
  int64_t ResumeOrLoad(std::optional<bool> resume, bool eval_only);

  // Rank 0 writes checkpoint_<completed>.safetensors and logs it; others return.
  void Save(int64_t completed_iterations) override;

 private:
  void Restore(const LoadedCheckpoint& loaded, bool eval_only);
  void AgreeWithRoot(int64_t& start_iter);

  CheckpointDir dir_;
  TrainingState& state_;
  dist::DataParallel& dp_;
  ConsoleLog log_;
};

}  // namespace mrcnn::engine
