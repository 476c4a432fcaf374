#pragma once
// The training loop, as Detectron2's TrainerBase: a short loop over an ordered list of
// hooks around an abstract step.
//
//   hooks: BeforeTrain (in order)
//   for iter in [start_iter, max_iter) until a hook calls RequestStop():
//     storage.set_iteration(iter)
//     hooks: BeforeStep
//     RunStep()                  the subclass: data, forward, backward, update; puts its
//                                numbers (losses, data time, ...) into the storage
//     storage.SyncRanks()        cross-rank means and votes, one collective
//     hooks: AfterStep
//   FlushDeferred()
//   hooks: AfterTrain            (also after a stop: hooks check stopping())
//
// A step may keep numbers on its device instead of reading them every iteration (a read
// makes the host wait for the device): FlushDeferred() puts them into the storage. Hooks
// that read the step's numbers or save its state (the writers, the checkpointer) call it
// first, and Train() calls it before AfterTrain; every rank reaches those calls at the same
// iterations, so a flush may run a collective.
//
// An exception from the step or a hook ends Train() at once (no AfterTrain): the job
// fails with that error, and what was checkpointed before stays valid. Torch-free.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/events/event_storage.h"

namespace mrcnn::engine {

class TrainerBase;

// Something that runs at fixed points of the loop (hooks/). Every phase is optional.
class HookBase {
 public:
  virtual ~HookBase() = default;
  virtual void BeforeTrain(TrainerBase&) {}
  virtual void BeforeStep(TrainerBase&) {}
  virtual void AfterStep(TrainerBase&) {}
  virtual void AfterTrain(TrainerBase&) {}
  // For logs and tests ("IterationTimer", "PeriodicCheckpointer", ...).
  virtual std::string name() const = 0;
};

class TrainerBase {
 public:
  explicit TrainerBase(EventStorage storage = EventStorage()) : storage_(std::move(storage)) {}
  virtual ~TrainerBase() = default;

  // Hooks run in the order given, in every phase.
  void RegisterHooks(std::vector<std::unique_ptr<HookBase>> hooks);
  const std::vector<std::unique_ptr<HookBase>>& hooks() const { return hooks_; }

  // Runs iterations start_iter .. max_iter-1 (none when start_iter >= max_iter).
  void Train(int64_t start_iter, int64_t max_iter);

  // The iteration being run (0-based); after Train, one past the last one run.
  int64_t iter() const { return iter_; }
  int64_t start_iter() const { return start_iter_; }
  int64_t max_iter() const { return max_iter_; }
  // Completed iterations once the current step is done (iter() + 1): the number the log,
  // checkpoints and evaluations are named by.
  int64_t done() const { return iter_ + 1; }
  bool is_last_iteration() const { return iter_ + 1 == max_iter_; }

  EventStorage& storage() { return storage_; }
  const EventStorage& storage() const { return storage_; }

  // Puts the numbers the step kept back into the storage (see above); may throw what the
  // step would have thrown had it read them at once (a non-finite loss). Default: none kept.
  virtual void FlushDeferred() {}

  // From a hook's AfterStep: the loop ends after this iteration's AfterStep hooks.
  void RequestStop() { stopping_ = true; }
  bool stopping() const { return stopping_; }

 protected:
  virtual void RunStep() = 0;

 private:
  EventStorage storage_;
  std::vector<std::unique_ptr<HookBase>> hooks_;
  int64_t iter_ = 0, start_iter_ = 0, max_iter_ = 0;
  bool stopping_ = false;
};

}  // namespace mrcnn::engine
