// The trainer binary: one process per GPU under the entrypoint, plus the offline tools
// (make-shapes, evaluate, predict, ...). Each subcommand lives in trainer/commands/.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "common/allocator_tuning.h"
#include "trainer/commands/command_registry.h"

int main(int argc, char** argv) {
  if (const std::string note = mrcnn::common::KeepFreedMemoryForReuse(); !note.empty()) {
    std::fprintf(stderr, "%s\n", note.c_str());
  }
  CLI::App app{"Mask R-CNN trainer: training, evaluation, inference and dataset tools"};
  app.require_subcommand(1);
  std::vector<mrcnn::trainer::CommandSpec> specs = mrcnn::trainer::RegisteredCommands();
  std::sort(specs.begin(), specs.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, mrcnn::trainer::CommandAction> actions;
  for (const auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    actions[sub] = spec.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed())
        return action();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainer: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
