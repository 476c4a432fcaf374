#pragma once
// The CloudWatch-friendly console lines (log_format.h) from the event store: one
// "[train] iter: ..." line per window, one "[eval] iter: ..." line per evaluation and IoU
// type. Torch-free.
#include "trainer/engine/events/console_log.h"
#include "trainer/engine/events/event_writer.h"
#include "trainer/engine/events/train_window.h"

namespace mrcnn::engine {

class ConsoleWriter : public WindowedEventWriter {
 public:
  ConsoleWriter(ConsoleLog log, TrainWindowSpec spec, int64_t start_iter);

 protected:
  void WriteWindow(const EventStorage& storage, int64_t last_written) override;
  void WriteEvaluation(const EvaluationEvent& event) override;

 private:
  ConsoleLog log_;
  TrainWindowSpec spec_;
};

// The first six COCO numbers of an evaluation as the log's entry.
EvalLogEntry EvalEntryOf(const EvaluationEvent& event);

}  // namespace mrcnn::engine
