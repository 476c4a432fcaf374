#pragma once
// The SM_* variables exactly as the public sagemaker-training toolkit names and
// encodes them (docs/contract.md, "Environment"): SM_HOSTS, SM_CURRENT_HOST, SM_HPS, SM_HP_<KEY>,
// SM_USER_ARGS, SM_CHANNELS, SM_CHANNEL_<NAME>, SM_TRAINING_ENV, SM_NUM_GPUS, ...
#include <string>

#include "common/env_map.h"
#include "common/job_environment.h"
#include "common/world.h"

namespace mrcnn::common {

// user_entry_point: the user's program (e.g. "train.py"), "" for the project trainer.
EnvMap TrainingEnvironmentVariables(const JobEnvironment& job, const World& world,
                                    const std::string& user_entry_point);

}  // namespace mrcnn::common
