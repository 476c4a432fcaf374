// `trainer metric-definitions`: the SageMaker MetricDefinitions JSON for the trainer's
// log lines (see trainer/engine/events/log_format.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "trainer/commands/command_registry.h"
#include "trainer/engine/events/log_format.h"

namespace mrcnn::trainer {
namespace {

const CommandRegistration kMetricDefinitions{
    "metric-definitions", "Print the SageMaker MetricDefinitions JSON matching the training log lines",
    [](CLI::App& sub) -> CommandAction {
      auto indent = std::make_shared<int>(2);
      auto samples = std::make_shared<bool>(false);
      sub.add_option("--indent", *indent, "JSON indentation (-1: one line)");
      sub.add_flag("--sample-lines", *samples,
                   "Instead, print log lines as the trainer formats them (for checking the regexes)");
      return [indent, samples]() {
        if (*samples) {
          for (const auto& line : engine::SampleLogLines()) std::printf("%s\n", line.c_str());
        } else {
          std::printf("%s\n", engine::MetricDefinitions().dump(*indent).c_str());
        }
        return 0;
      };
    }};

}  // namespace
}  // namespace mrcnn::trainer
