#pragma once
// Subcommands of the `trainer` binary register themselves from their own source file
// in trainer/commands/, so parts (data, eval, model, engine) add commands without
// touching a shared switch. Files here are compiled into the executable itself (not a
// static library), so the static registration objects are never dropped by the linker.
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mrcnn::trainer {

// Runs the command after argument parsing; returns the process exit code.
using CommandAction = std::function<int()>;
// Declares the command's options on `sub` (binding them to captured state) and returns
// the action that uses them.
using CommandSetup = std::function<CommandAction(CLI::App& sub)>;

struct CommandSpec {
  std::string name;
  std::string description;
  CommandSetup setup;
};

const std::vector<CommandSpec>& RegisteredCommands();

// Use as a namespace-scope static: `static const CommandRegistration kX{"name", "...", setup};`
struct CommandRegistration {
  CommandRegistration(std::string name, std::string description, CommandSetup setup);
};

}  // namespace mrcnn::trainer
