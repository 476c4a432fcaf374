#include "trainer/engine/events/jsonl_writer.h"

#include <stdexcept>

#include "trainer/engine/events/console_writer.h"

namespace mrcnn::engine {

JsonlWriter::JsonlWriter(const std::filesystem::path& file, TrainWindowSpec spec,
                         int64_t start_iter)
    : WindowedEventWriter(start_iter), file_(file), spec_(spec) {
  if (file_.has_parent_path())
    std::filesystem::create_directories(file_.parent_path());
  out_.open(file_, std::ios::app);
  if (!out_)
    throw std::runtime_error("cannot open " + file_.string() + " for appending");
}

void JsonlWriter::Append(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_)
    throw std::runtime_error("cannot append to " + file_.string());
}

void JsonlWriter::WriteWindow(const EventStorage& storage, int64_t last_written) {
  Append(TrainLogJson(TrainWindowEntry(storage, last_written, spec_)));
}

void JsonlWriter::WriteEvaluation(const EvaluationEvent& event) {
  Append(EvalLogJson(EvalEntryOf(event)));
}

}  // namespace mrcnn::engine
