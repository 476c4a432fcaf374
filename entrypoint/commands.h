#pragma once
// The entrypoint's subcommands; each returns the process exit code.
//   0   success
//   2   bad configuration (output/failure says which file and field)
//   3   peers did not show up in time (multi-host)
//   127 the program could not be started
//   else the first failing child's code, 128 + signal for a signal
#include <string>
#include <string_view>
#include <vector>

#include "entrypoint/launch_plan.h"

namespace mrcnn::entrypoint {

constexpr int kExitConfigError = 2;
constexpr int kExitPeerWait = 3;

int RunTrain(const TrainOptions& options);
int PrintEnvironment(const TrainOptions& options);
// Replaces this process with the server; returns only on failure.
int ExecServer(const std::vector<std::string>& args);
// Whether a first argument is one KServe gives a serving container in place of its CMD
// (`--model_name=NAME`, `--model_dir`, `--http_port`, either spelling, with or without
// `=value`): the image was started to serve, and `serve` is implied.
bool IsKServeServerArgument(std::string_view arg);

}  // namespace mrcnn::entrypoint
