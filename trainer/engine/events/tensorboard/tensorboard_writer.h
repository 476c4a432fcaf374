#pragma once
// TensorBoard event files from the event store (one more EventWriter): every training
// scalar of every iteration ("train/<name>", step = completed iterations), every COCO
// number of every evaluation ("eval/<bbox|segm>/<AP|AP50|...|ARl>"), and the images and
// histograms hooks put. Records are TFRecord-framed tensorboard.Event protos
// (tensorboard_event.proto, field numbers as TensorBoard publishes them), flushed after
// every write, so a job killed at any moment leaves a readable file.
//
// A resumed run (start_iter > 0) writes a new file that begins with a SessionLog START at
// step start_iter + 1 (its first step): TensorBoard then drops what an earlier, killed run wrote
// after that step (its steps are redone), so the curves never go backwards. Rank 0 only.
// Torch-free.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "trainer/engine/events/event_writer.h"
#include "trainer/engine/events/train_window.h"

namespace mrcnn::engine {

class TfRecordFile;

class TensorBoardWriter : public WindowedEventWriter {
 public:
  // Creates `dir` and a new "events.out.tfevents.<time>.<host>.<pid>" file in it; throws
  // std::runtime_error naming the path when it cannot.
  TensorBoardWriter(const std::filesystem::path& dir, TrainWindowSpec spec, int64_t start_iter);
  ~TensorBoardWriter() override;

  void WriteMedia(const EventStorage& storage) override;
  void Close() override;

  const std::filesystem::path& file() const;

 protected:
  void WriteWindow(const EventStorage& storage, int64_t last_written) override;
  void WriteEvaluation(const EvaluationEvent& event) override;
  void EvaluationsWritten() override;

 private:
  std::unique_ptr<TfRecordFile> file_;
  TrainWindowSpec spec_;
};

// Scalars of the store that are not curves (the stop vote, the ETA, the checkpoint marker).
bool IsTensorBoardScalar(const std::string& name);

}  // namespace mrcnn::engine
