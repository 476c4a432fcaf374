#include <catch2/catch.hpp>
#include <regex>

#include "trainer/engine/events/log_format.h"

using namespace mrcnn::engine;

TEST_CASE("train line carries every value, in regex-friendly form", "[log]") {
  TrainLogEntry e;
  e.iteration = 20;
  e.max_iter = 600;
  e.losses = {{"loss_classifier", 0.5}, {"loss_mask", 0.25}};
  e.total_loss = 0.75;
  e.lr = 2e-5;
  e.iter_time = 1.5;
  e.data_time = 0.01;
  e.data_wait_share = 0.01 / 1.5;
  e.images_per_sec = 2.6667;
  e.eta_seconds = 3723;
  e.max_mem_mb = 1024;
  std::string line = FormatTrainLine(e);
  CHECK(line ==
        "[train] iter: 20/600  total_loss: 0.7500  loss_classifier: 0.5000  loss_mask: 0.2500  lr: 2e-05  "
        "iter_time: 1.5000  data_time: 0.0100  data_wait: 0.7%  images/s: 2.67  eta: 1:02:03  max_mem: 1024MB");
  auto j = TrainLogJson(e);
  CHECK(j["loss_mask"] == 0.25);
  CHECK(j["iteration"] == 20);
  CHECK_FALSE(j.contains("loss_scale"));  // no loss scaling: no field
  e.loss_scale = 1.4757395258967641e20;    // fp16: 2^67 after overflows
  line = FormatTrainLine(e);
  CHECK(line.find("  lr: 2e-05  loss_scale: 1.47574e+20  iter_time: ") != std::string::npos);
  CHECK(TrainLogJson(e)["loss_scale"] == 1.4757395258967641e20);
  CHECK(FormatDuration(-1) == "0:00:00");
}

TEST_CASE("eval line and metric definitions agree (ECMAScript check, pytest checks Python re)", "[log]") {
  EvalLogEntry e{1000, "segm", {0.5, 0.75, 0.4, -1, 0.3, 0.6}};
  std::string line = FormatEvalLine(e);
  CHECK(line ==
        "[eval] iter: 1000  segm/AP: 0.5000  segm/AP50: 0.7500  segm/AP75: 0.4000  segm/APs: -1.0000  "
        "segm/APm: 0.3000  segm/APl: 0.6000");
  auto defs = MetricDefinitions();
  CHECK(defs.size() <= 40);
  bool found = false;
  for (const auto& d : defs) {
    CHECK(d["Regex"].get<std::string>().size() <= 500);
    if (d["Name"] == "val:segm_AP50") {
      std::string re = d["Regex"];
      // ECMAScript has no \b-free problem here; it is close enough for a smoke check.
      std::smatch m;
      REQUIRE(std::regex_search(line, m, std::regex(re)));
      CHECK(m[1] == "0.7500");
      found = true;
    }
  }
  CHECK(found);
}
