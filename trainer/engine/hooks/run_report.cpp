#include "trainer/engine/hooks/run_report.h"

namespace mrcnn::engine {

RunReportHook::RunReportHook(std::filesystem::path file, RunReportInputs inputs, ConsoleLog log)
    : file_(std::move(file)), inputs_(std::move(inputs)), log_(log) {}

void RunReportHook::KeepPictures(const EventStorage& storage) {
  std::vector<ImageEvent> pictures;
  for (const auto& image : storage.images()) {
    if (image.tag.rfind("val/", 0) == 0)
      pictures.push_back(image);
  }
  if (!pictures.empty())
    inputs_.pictures = std::move(pictures);
}

void RunReportHook::AfterStep(TrainerBase& trainer) {
  KeepPictures(trainer.storage());
}

void RunReportHook::AfterTrain(TrainerBase& trainer) {
  if (!trainer.stopping())
    Write(trainer.storage());
}

void RunReportHook::Write(const EventStorage& storage) {
  KeepPictures(storage);
  WriteRunReport(file_, storage, inputs_);
  log_.Line("[report] wrote " + file_.string());
}

}  // namespace mrcnn::engine
