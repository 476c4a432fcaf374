#include "trainer/engine/events/jsonl_writer.h"

#include <stdexcept>

#include "trainer/engine/events/console_writer.h"

namespace mrcnn::engine {

JsonlWriter::JsonlWriter(const std::filesystem::path& file, TrainWindowSpec spec,
                         int64_t start_iter)
    : file_(file), spec_(spec), last_written_(start_iter - 1) {
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

void JsonlWriter::WriteTraining(const EventStorage& storage) {
  if (storage.iteration() <= last_written_)
    return;
  Append(TrainLogJson(TrainWindowEntry(storage, last_written_, spec_)));
  last_written_ = storage.iteration();
}

void JsonlWriter::WriteEvaluations(const EventStorage& storage) {
  const auto& all = storage.evaluations();
  for (; evaluations_written_ < all.size(); ++evaluations_written_)
    Append(EvalLogJson(EvalEntryOf(all[evaluations_written_])));
}

}  // namespace mrcnn::engine
