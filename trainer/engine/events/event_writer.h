#pragma once
// What reads the event store: the CloudWatch console line and metrics.jsonl now
// (console_writer.h, jsonl_writer.h), TensorBoard later. PeriodicWriterHook calls every
// writer at the log period (and at the last or stopping iteration) for the training
// scalars, and whenever the store holds evaluations a writer has not written. Writers
// exist on rank 0 only. To add one: implement this interface and append it in
// BuildWriters (train_job.cpp). Torch-free.
#include "trainer/engine/events/event_storage.h"

namespace mrcnn::engine {

class EventWriter {
 public:
  virtual ~EventWriter() = default;
  // The training scalars of the iterations since this writer's last call, as one
  // record for the window ending at storage.iteration().
  virtual void WriteTraining(const EventStorage& storage) = 0;
  // Evaluations (storage.evaluations()) this writer has not written yet.
  virtual void WriteEvaluations(const EventStorage& storage) = 0;
  // Images and histograms put since the last call (the store drops them afterwards).
  virtual void WriteMedia(const EventStorage&) {}
  virtual void Close() {}
};

// The bookkeeping every writer of windows and evaluations needs: which iteration its last
// window ended at (start_iter - 1 at first, so a resumed job's first window starts where
// it resumed) and how many evaluations it has written. Writers implement WriteWindow (one
// record for the iterations after `last_written`, called only when there are some) and
// WriteEvaluation (one evaluation), and EvaluationsWritten to flush after a run of them.
class WindowedEventWriter : public EventWriter {
 public:
  explicit WindowedEventWriter(int64_t start_iter) : last_written_(start_iter - 1) {}

  void WriteTraining(const EventStorage& storage) final {
    if (storage.iteration() <= last_written_)
      return;
    WriteWindow(storage, last_written_);
    last_written_ = storage.iteration();
  }

  void WriteEvaluations(const EventStorage& storage) final {
    const auto& all = storage.evaluations();
    if (evaluations_written_ == all.size())
      return;
    for (; evaluations_written_ < all.size(); ++evaluations_written_)
      WriteEvaluation(all[evaluations_written_]);
    EvaluationsWritten();
  }

 protected:
  virtual void WriteWindow(const EventStorage& storage, int64_t last_written) = 0;
  virtual void WriteEvaluation(const EvaluationEvent& event) = 0;
  virtual void EvaluationsWritten() {}

 private:
  int64_t last_written_;  // last iteration (0-based) of the previous window
  size_t evaluations_written_ = 0;
};

}  // namespace mrcnn::engine
