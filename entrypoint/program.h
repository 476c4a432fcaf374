#pragma once
// Which program `entrypoint train` runs, as an argv vector (never a shell string):
//  - the user's program when hyperparameter sagemaker_program or env
//    SAGEMAKER_PROGRAM names one: a file in the code dir (sagemaker_submit_directory
//    when it is a local directory, else <base>/code). ".py" runs with
//    $MRCNN_PYTHON or python3 from PATH, ".sh" with /bin/sh, anything else is
//    executed directly. The child starts in the code dir, like the public toolkit.
//  - otherwise the project's trainer: `trainer train <user argv>`, found at
//    --trainer / $MRCNN_TRAINER, else next to the entrypoint binary.
// In both cases the user's hyperparameters follow as sorted "--key value"
// pairs, then any extra arguments given after "--".
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/env_map.h"
#include "common/job_environment.h"

namespace mrcnn::entrypoint {

struct ProgramChoice {
  std::vector<std::string> argv;
  std::string user_entry_point;  // "train.py" for SM_USER_ENTRY_POINT; "" for the trainer
  std::string working_dir;       // "" = inherit
};

struct ProgramOptions {
  std::optional<std::string> trainer;  // --trainer
  std::filesystem::path self_dir;      // directory of the entrypoint binary
  std::vector<std::string> extra_args;
};

// Throws common::ConfigError naming the hyperparameter or variable at fault.
ProgramChoice ResolveProgram(const common::JobEnvironment& job, const common::EnvMap& env,
                             const ProgramOptions& options);

// Directory of the running executable (/proc/self/exe).
std::filesystem::path SelfDirectory();

}  // namespace mrcnn::entrypoint
