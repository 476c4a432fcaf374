#pragma once
// At the end of a run that was not stopped, writes the run report (events/run_report.h)
// from the event store, with the newest evaluation's validation pictures, which it keeps
// as they appear (the writers drop media once written). Register it before
// PeriodicWriter; rank 0 only. Torch-free.
#include <filesystem>

#include "trainer/engine/events/console_log.h"
#include "trainer/engine/events/run_report.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class RunReportHook : public HookBase {
 public:
  RunReportHook(std::filesystem::path file, RunReportInputs inputs, ConsoleLog log);
  void AfterStep(TrainerBase& trainer) override;
  void AfterTrain(TrainerBase& trainer) override;
  // Writes the report from `storage` now and says so in the log: what AfterTrain does, and
  // what an eval-only job, which runs no loop, calls itself.
  void Write(const EventStorage& storage);
  std::string name() const override { return "RunReport"; }

 private:
  void KeepPictures(const EventStorage& storage);
  std::filesystem::path file_;
  RunReportInputs inputs_;
  ConsoleLog log_;
};

}  // namespace mrcnn::engine
