// The run report's HTML: escaping, charts from the store, tables, embedded pictures.
#include <catch2/catch.hpp>
#include <string>

#include "trainer/engine/events/run_report.h"

using namespace mrcnn::engine;

TEST_CASE("report: title escaped, loss and AP charts, COCO tables, pictures embedded", "[report]") {
  EventStorage s;
  for (int i = 0; i < 5; ++i) {
    s.set_iteration(i);
    s.PutScalar("total_loss", 2.0 - 0.1 * i);
    s.PutScalar("loss_mask", 1.0 - 0.1 * i);
    s.PutScalar("lr", 0.01);
    s.PutScalar("time", 0.5);
  }
  EvaluationEvent e{5, "bbox", {0.5, 0.75, -1}, {{"circle", 0.6}, {"square", -1}}};
  s.PutEvaluation(e);
  RunReportInputs in;
  in.title = "run <a&b>";
  in.config_yaml = "SOLVER:\n  BASE_LR: 0.01";
  in.device = "cpu";
  in.images_per_iteration = 8;
  in.pictures.push_back({5, "val/1.png", 1, 1, 3, "abc"});
  const std::string html = RenderRunReport(s, in);
  CHECK(html.find("<title>run &lt;a&amp;b&gt;</title>") != std::string::npos);
  CHECK(html.find("aria-label=\"Training losses\"") != std::string::npos);
  CHECK(html.find("aria-label=\"COCO AP at each evaluation\"") != std::string::npos);
  CHECK(html.find("<polyline") != std::string::npos);
  CHECK(html.find("<circle") != std::string::npos);  // one evaluation: a point, not a line
  CHECK(html.find("<td>0.750</td>") != std::string::npos);
  CHECK(html.find("<td>circle</td><td>0.600</td>") != std::string::npos);
  CHECK(html.find("<td>square</td><td>&ndash;</td>") != std::string::npos);
  CHECK(html.find("data:image/png;base64,YWJj") != std::string::npos);  // "abc"
  CHECK(html.find("16.00 images/s") != std::string::npos);
  CHECK(html.find("BASE_LR: 0.01") != std::string::npos);
}

TEST_CASE("chart without data says so", "[report]") {
  const std::string svg = SvgLineChart("Empty", {{"x", {}}}, "iteration");
  CHECK(svg.find("no data") != std::string::npos);
}
