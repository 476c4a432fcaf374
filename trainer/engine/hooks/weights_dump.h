#pragma once
// Test support: with MRCNN_DUMP_WEIGHTS_DIR set, every rank writes its weights before the
// first and after the last iteration (`dump("initial")`, `dump("final")`), so tests can
// compare ranks and process counts. Registered only when the variable is set.
// Torch-free.
#include <functional>
#include <string>

#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class WeightsDumpHook : public HookBase {
 public:
  explicit WeightsDumpHook(std::function<void(const std::string& when)> dump)
      : dump_(std::move(dump)) {}
  void BeforeTrain(TrainerBase&) override { dump_("initial"); }
  void AfterTrain(TrainerBase&) override { dump_("final"); }
  std::string name() const override { return "WeightsDump"; }

 private:
  std::function<void(const std::string&)> dump_;
};

}  // namespace mrcnn::engine
