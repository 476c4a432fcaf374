// `trainer train`: the training job under the entrypoint. Arguments are the job's
// hyperparameters as "--key value" pairs (see trainer/engine/config/job_config.h); everything
// else comes from the SM_* and torchrun environment.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/env_map.h"
#include "trainer/commands/command_registry.h"
#include "trainer/engine/config/job_config.h"
#include "trainer/engine/config/weights_fetch.h"
#include "trainer/engine/hooks/stop_signal.h"
#include "trainer/engine/train_job.h"

namespace mrcnn::trainer {
namespace {

const CommandRegistration kTrain{
    "train",
    "Train Mask R-CNN (hyperparameters as --config-file, --local-config-file, --opts, --resume, "
    "--eval-only, "
    "--base-dir; SM_* channels and torchrun variables from the environment)",
    [](CLI::App& sub) -> CommandAction {
      // Hyperparameters are validated by ParseTrainJobArgs (closest-key errors), so CLI11
      // passes them through untouched.
      sub.prefix_command();
      CLI::App* app = &sub;
      return [app]() {
        const std::vector<std::string> argv = app->remaining();
        const common::EnvMap env = common::CurrentEnvironment();
        engine::InstallStopHandlers();
        const engine::TrainJob job =
            engine::ResolveTrainJob(engine::ParseTrainJobArgs(argv), env, "/proc/self/exe");
        // Before the model and the data: a download that cannot succeed fails the job in
        // the time its bounded tries take, not after minutes of setup.
        engine::FetchJobWeights(job, env, [](const std::string& line) {
          std::fprintf(stdout, "%s\n", line.c_str());
          std::fflush(stdout);
        });
        return engine::RunTrainJob(job, engine::ProcessWorld::FromEnv(env));
      };
    }};

}  // namespace
}  // namespace mrcnn::trainer
