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
    : log_(log), spec_(spec), last_written_(start_iter - 1) {}

void ConsoleWriter::WriteTraining(const EventStorage& storage) {
  if (storage.iteration() <= last_written_)
    return;
  log_.Line(FormatTrainLine(TrainWindowEntry(storage, last_written_, spec_)));
  last_written_ = storage.iteration();
}

void ConsoleWriter::WriteEvaluations(const EventStorage& storage) {
  const auto& all = storage.evaluations();
  for (; evaluations_written_ < all.size(); ++evaluations_written_)
    log_.Line(FormatEvalLine(EvalEntryOf(all[evaluations_written_])));
}

}  // namespace mrcnn::engine
