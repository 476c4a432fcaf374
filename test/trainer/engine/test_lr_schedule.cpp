#include <catch2/catch.hpp>
#include <cmath>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/solver/lr_schedule.h"

using namespace mrcnn::engine;

TEST_CASE("multistep with linear warmup (Detectron2 semantics)", "[lr]") {
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"SOLVER.BASE_LR", "0.02", "SOLVER.STEPS", "[100, 200]", "SOLVER.MAX_ITER", "300",
               "SOLVER.WARMUP_ITERS", "10", "SOLVER.WARMUP_FACTOR", "0.001", "SOLVER.GAMMA", "0.1"});
  LrSchedule s = LrSchedule::FromConfig(c);
  CHECK(s.LrAt(0) == Approx(0.02 * 0.001));
  CHECK(s.LrAt(5) == Approx(0.02 * (0.001 * 0.5 + 0.5)));
  CHECK(s.LrAt(10) == Approx(0.02));
  CHECK(s.LrAt(99) == Approx(0.02));
  CHECK(s.LrAt(100) == Approx(0.002));  // the drop applies at the step itself
  CHECK(s.LrAt(199) == Approx(0.002));
  CHECK(s.LrAt(200) == Approx(0.0002));
  CHECK(s.LrAt(299) == Approx(0.0002));
}

TEST_CASE("cosine and constant warmup", "[lr]") {
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"SOLVER.LR_SCHEDULER_NAME", "WarmupCosineLR", "SOLVER.BASE_LR", "0.1", "SOLVER.BASE_LR_END", "0.001",
               "SOLVER.MAX_ITER", "1000", "SOLVER.WARMUP_ITERS", "100", "SOLVER.WARMUP_METHOD", "constant",
               "SOLVER.WARMUP_FACTOR", "0.5"});
  LrSchedule s = LrSchedule::FromConfig(c);
  auto cosine = [](double it) { return 0.001 + 0.5 * (0.1 - 0.001) * (1 + std::cos(M_PI * it / 1000)); };
  CHECK(s.LrAt(0) == Approx(0.1 * 0.5));
  CHECK(s.LrAt(99) == Approx(cosine(99) * 0.5));
  CHECK(s.LrAt(100) == Approx(cosine(100)));
  CHECK(s.LrAt(500) == Approx(cosine(500)));
  CHECK(s.LrAt(1000) == Approx(0.001));
}

TEST_CASE("schedule keys are validated", "[lr]") {
  using mrcnn::common::ConfigError;
  auto with = [](std::vector<std::string> opts) {
    TrainConfig c = TrainConfig::Defaults();
    c.MergeOpts(opts);
    return LrSchedule::FromConfig(c);
  };
  CHECK_THROWS_WITH(with({"SOLVER.LR_SCHEDULER_NAME", "Step"}), Catch::Contains("SOLVER.LR_SCHEDULER_NAME"));
  CHECK_THROWS_WITH(with({"SOLVER.STEPS", "[20, 10]"}), Catch::Contains("SOLVER.STEPS"));
  CHECK_THROWS_WITH(with({"SOLVER.WARMUP_METHOD", "exp"}), Catch::Contains("SOLVER.WARMUP_METHOD"));
  CHECK_THROWS_WITH(with({"SOLVER.MAX_ITER", "0"}), Catch::Contains("SOLVER.MAX_ITER"));
}
