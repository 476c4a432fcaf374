#include "trainer/engine/events/console_writer.h"

namespace mrcnn::engine {

EvalLogEntry EvalEntryOf(const EvaluationEvent& event) {
  EvalLogEntry e;
  e.iteration = event.iteration;
  e.iou_type = event.iou_type;
  for (size_t k = 0; k < e.ap.size(); ++k)
    e.ap[k] = event.stats[k];
  return e;
}

ConsoleWriter::ConsoleWriter(ConsoleLog log, TrainWindowSpec spec, int64_t start_iter)
    : WindowedEventWriter(start_iter), log_(log), spec_(spec) {}

void ConsoleWriter::WriteWindow(const EventStorage& storage, int64_t last_written) {
  log_.Line(FormatTrainLine(TrainWindowEntry(storage, last_written, spec_)));
}

void ConsoleWriter::WriteEvaluation(const EvaluationEvent& event) {
  log_.Line(FormatEvalLine(EvalEntryOf(event)));
}

}  // namespace mrcnn::engine
