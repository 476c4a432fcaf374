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

}  // namespace mrcnn::engine
