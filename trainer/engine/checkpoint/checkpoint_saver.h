#pragma once
// What the checkpointing hooks need from a checkpointer: save the training state as of a
// number of completed iterations. TrainingCheckpointer (training_checkpointer.h) is the
// real one; hook tests use fakes. Torch-free.
#include <cstdint>

namespace mrcnn::engine {

class CheckpointSaver {
 public:
  virtual ~CheckpointSaver() = default;
  // Called on every rank at the same iteration; the implementation decides who writes.
  virtual void Save(int64_t completed_iterations) = 0;
};

}  // namespace mrcnn::engine
