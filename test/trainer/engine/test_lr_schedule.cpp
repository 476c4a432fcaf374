#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/solver/lr_schedule.h"
#include "trainer/engine/solver/reference_world_size.h"

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
  // Constant warmup holds WARMUP_FACTOR x the schedule's start (Detectron2's), not x its
  // current value.
  CHECK(s.LrAt(0) == Approx(0.1 * 0.5));
  CHECK(s.LrAt(99) == Approx(0.1 * 0.5));
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

// test/data/detectron2/solver/lr_schedules.json: the rate of every iteration of Detectron2's
// own schedulers (scripts/detectron2_solver_golden.py), as change points.
TEST_CASE("every iteration's learning rate equals Detectron2's", "[lr]") {
  const YAML::Node cases = YAML::LoadFile(std::string(MRCNN_SOURCE_DIR) + "/test/data/detectron2/solver/lr_schedules.json");
  REQUIRE(cases.size() == 6);
  for (const auto& entry : cases) {
    const std::string name = entry.first.as<std::string>();
    INFO(name);
    std::vector<std::string> opts;
    for (const auto& value : entry.second["opts"]) {
      if (value.IsSequence()) {
        std::string list = "[";
        for (const auto& item : value) list += (list.size() > 1 ? ", " : "") + item.as<std::string>();
        opts.push_back(list + "]");
      } else {
        opts.push_back(value.as<std::string>());
      }
    }
    TrainConfig c = TrainConfig::Defaults();
    c.MergeOpts(opts);
    const LrSchedule s = LrSchedule::FromConfig(c);
    const YAML::Node changes = entry.second["changes"];
    REQUIRE(changes.size() > 1);
    size_t next = 0;
    double expected = 0;
    int64_t mismatches = 0;
    for (int64_t iteration = 0; iteration < s.max_iter; ++iteration) {
      if (next < changes.size() && changes[next][0].as<int64_t>() == iteration) expected = changes[next++][1].as<double>();
      // Bit for bit: the same operations on the same doubles as fvcore's.
      if (s.LrAt(iteration) != expected && ++mismatches <= 3) {
        INFO("iteration " << iteration);
        CHECK(s.LrAt(iteration) == expected);
      }
    }
    CHECK(next == changes.size());
    CHECK(mismatches == 0);
  }
}

TEST_CASE("REFERENCE_WORLD_SIZE scales the batch, LR and iterations as Detectron2 does", "[lr]") {
  // auto_scale_workers' own example: written for 8 processes, run by 16.
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"SOLVER.IMS_PER_BATCH", "16", "SOLVER.BASE_LR", "0.1", "SOLVER.REFERENCE_WORLD_SIZE", "8",
               "SOLVER.MAX_ITER", "5000", "SOLVER.STEPS", "(4000,)", "SOLVER.CHECKPOINT_PERIOD", "1000",
               "SOLVER.WARMUP_ITERS", "1000", "TEST.EVAL_PERIOD", "250"});
  TrainConfig same = c;
  CHECK(ScaleToReferenceWorldSize(same, 8).empty());
  CHECK(same == c);
  const std::string line = ScaleToReferenceWorldSize(c, 16);
  CHECK_THAT(line, Catch::Contains("8 -> 16"));
  CHECK(c.GetInt("SOLVER.IMS_PER_BATCH") == 32);
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 0.2);
  CHECK(c.GetInt("SOLVER.MAX_ITER") == 2500);
  CHECK(c.GetIntList("SOLVER.STEPS") == IntList{2000});
  CHECK(c.GetInt("SOLVER.CHECKPOINT_PERIOD") == 500);
  CHECK(c.GetInt("SOLVER.WARMUP_ITERS") == 500);
  CHECK(c.GetInt("TEST.EVAL_PERIOD") == 125);
  CHECK(c.GetInt("SOLVER.REFERENCE_WORLD_SIZE") == 16);
  // Three processes for a config of two: 1.5x, rounded half to even as Python rounds.
  TrainConfig odd = TrainConfig::Defaults();
  odd.MergeOpts({"SOLVER.IMS_PER_BATCH", "4", "SOLVER.REFERENCE_WORLD_SIZE", "2", "SOLVER.MAX_ITER", "3",
                 "SOLVER.STEPS", "(1, 2)", "SOLVER.WARMUP_ITERS", "0"});
  ScaleToReferenceWorldSize(odd, 3);
  CHECK(odd.GetInt("SOLVER.IMS_PER_BATCH") == 6);
  CHECK(odd.GetInt("SOLVER.MAX_ITER") == 2);                  // 3 / 1.5 = 2
  CHECK(odd.GetIntList("SOLVER.STEPS") == IntList{1, 1});     // round(0.667), round(1.333)
  TrainConfig bad = TrainConfig::Defaults();
  bad.MergeOpts({"SOLVER.IMS_PER_BATCH", "6", "SOLVER.REFERENCE_WORLD_SIZE", "4"});
  CHECK_THROWS_WITH(ScaleToReferenceWorldSize(bad, 2), Catch::Contains("SOLVER.REFERENCE_WORLD_SIZE"));
}
