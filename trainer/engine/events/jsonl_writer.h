#pragma once
// <output>/metrics.jsonl: one JSON object a line, appended and flushed per record (a
// killed job leaves whole lines behind). The same windows and evaluations as the console
// (TrainLogJson / EvalLogJson of log_format.h). Torch-free.
#include <filesystem>
#include <fstream>

#include "trainer/engine/events/event_writer.h"
#include "trainer/engine/events/train_window.h"

namespace mrcnn::engine {

class JsonlWriter : public WindowedEventWriter {
 public:
  // Creates the directory; throws std::runtime_error naming the file when it cannot be
  // opened for appending.
  JsonlWriter(const std::filesystem::path& file, TrainWindowSpec spec, int64_t start_iter);

 protected:
  void WriteWindow(const EventStorage& storage, int64_t last_written) override;
  void WriteEvaluation(const EvaluationEvent& event) override;

 private:
  void Append(const nlohmann::json& record);

  std::filesystem::path file_;
  std::ofstream out_;
  TrainWindowSpec spec_;
};

}  // namespace mrcnn::engine
