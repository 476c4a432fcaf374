// entrypoint: the container's PID 1. `train` supervises the training processes,
// `serve` becomes the model server, `env` prints what `train` would do; no argument at
// all is `train`, and a server flag first (KServe's `--model_name=NAME`) is `serve`.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "entrypoint/commands.h"
#include "entrypoint/fd_io.h"

namespace {

void AddTrainOptions(CLI::App& command, mrcnn::entrypoint::TrainOptions& options) {
  command.add_option("--base-dir", options.base_dir,
                     "job tree root (default: $SAGEMAKER_BASE_DIR, else /opt/ml)");
  command
      .add_option("--nproc-per-node", options.nproc_per_node,
                  "processes on this node (default: PET_NPROC_PER_NODE, "
                  "sagemaker_mpi_num_of_processes_per_host, GPUs, 1)")
      ->check(CLI::PositiveNumber);
  command.add_option("--master-addr", options.master_addr, "override the master address");
  command.add_option("--master-port", options.master_port, "override the master port")
      ->check(CLI::Range(1, 65535));
  command.add_option(
      "--grace-period", options.grace_period_s,
      "seconds between SIGTERM and SIGKILL (default: $MRCNN_GRACE_PERIOD, else 110)");
  command.add_option("--peer-timeout", options.peer_timeout_s,
                     "seconds to wait for other hosts (default: $MRCNN_PEER_TIMEOUT, else 900)");
  command.add_flag(
      "--rank-prefix", options.rank_prefix,
      "prefix lines of ranks other than 0 with \"[rank N] \" (or MRCNN_RANK_PREFIX=1)");
  command.add_option("--trainer", options.trainer,
                     "trainer binary (default: $MRCNN_TRAINER, else next to this binary)");
  command.add_option("args", options.extra_args, "extra arguments for the program, after --");
}

}  // namespace

int main(int argc, char** argv) {
  // `serve` passes everything through untouched, so it bypasses the parser.
  if (argc >= 2 && std::string(argv[1]) == "serve") {
    return mrcnn::entrypoint::ExecServer(std::vector<std::string>(argv + 2, argv + argc));
  }
  // KServe's container args replace the image's CMD (`serve`): `entrypoint --model_name=NAME`
  // was started to serve, with the server's own flags.
  if (argc >= 2 && mrcnn::entrypoint::IsKServeServerArgument(argv[1])) {
    mrcnn::entrypoint::LogLine(
        "started with server arguments (KServe's --model_name, ...): serving");
    return mrcnn::entrypoint::ExecServer(std::vector<std::string>(argv + 1, argv + argc));
  }
  // SageMaker starts a training image with `train` and a hosting one with `serve`, but the
  // local mode of the SageMaker Python SDK v3 starts the training image with no argument at
  // all (its compose service has no command). Only a bare start means `train`: options
  // without a command, an unknown command and --help stay the parser's.
  std::vector<const char*> args(argv, argv + argc);
  if (argc <= 1) {
    mrcnn::entrypoint::LogLine(
        "no command given: running `entrypoint train` (SageMaker passes train or serve; the "
        "SageMaker Python SDK v3's local mode passes none)");
    args = {argc == 1 ? argv[0] : "entrypoint", "train"};
  }
  CLI::App app{"Mask R-CNN container entrypoint: train | serve | env"};
  app.require_subcommand(1);
  mrcnn::entrypoint::TrainOptions train_options;
  CLI::App* train = app.add_subcommand("train", "run the training job under supervision");
  AddTrainOptions(*train, train_options);
  mrcnn::entrypoint::TrainOptions env_options;
  CLI::App* env = app.add_subcommand("env", "print the resolved job as JSON");
  AddTrainOptions(*env, env_options);
  app.add_subcommand("serve",
                     "exec the model server with the remaining arguments; it serves --model-dir, "
                     "else $SM_MODEL_DIR, else <base>/model with base = --base-dir, else "
                     "$SAGEMAKER_BASE_DIR, else /opt/ml (as train does)");
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : mrcnn::entrypoint::kExitConfigError;
  }
  if (train->parsed())
    return mrcnn::entrypoint::RunTrain(train_options);
  return mrcnn::entrypoint::PrintEnvironment(env_options);
}
