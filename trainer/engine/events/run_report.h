#pragma once
// The run at a glance, as one self-contained HTML file (output/data/report.html, inside
// output.tar.gz): loss, learning-rate and AP curves as inline SVG plots, the final COCO
// numbers and per-category AP, throughput, a grid of validation pictures with their
// predictions, and the resolved config. No script, no external file: any browser shows it
// from the tarball. Torch-free.
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/engine/events/event_storage.h"

namespace mrcnn::engine {

struct RunReportInputs {
  std::string title;        // e.g. "Mask R-CNN training run"
  std::string config_yaml;  // the resolved config
  std::string device;       // "cpu", "cuda:0"
  int64_t processes = 1;
  int64_t images_per_iteration = 0;
  std::vector<ImageEvent> pictures;  // validation predictions (PNG)
};

// The HTML text.
std::string RenderRunReport(const EventStorage& storage, const RunReportInputs& inputs);

// A line chart: each series is (x, y) points; axes with min/max ticks and a legend.
struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
};
std::string SvgLineChart(const std::string& title, const std::vector<ChartSeries>& series,
                         const std::string& x_label);

// Writes RenderRunReport atomically-enough for a report (temporary file, then rename);
// throws naming the file.
void WriteRunReport(const std::filesystem::path& file, const EventStorage& storage,
                    const RunReportInputs& inputs);

}  // namespace mrcnn::engine
