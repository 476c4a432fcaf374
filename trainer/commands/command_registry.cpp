#include "trainer/commands/command_registry.h"

namespace mrcnn::trainer {
namespace {
// Function-local so registration from other translation units' static initialisers
// never sees an unconstructed vector.
std::vector<CommandSpec>& MutableCommands() {
  static std::vector<CommandSpec> commands;
  return commands;
}
}  // namespace

const std::vector<CommandSpec>& RegisteredCommands() { return MutableCommands(); }

CommandRegistration::CommandRegistration(std::string name, std::string description,
                                         CommandSetup setup) {
  MutableCommands().push_back({std::move(name), std::move(description), std::move(setup)});
}

}  // namespace mrcnn::trainer
