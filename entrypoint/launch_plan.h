#pragma once
// Everything `entrypoint train` (and `entrypoint env`) decides before starting
// a process: the job, the world, the program and each child's environment.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/env_map.h"
#include "common/job_environment.h"
#include "common/job_paths.h"
#include "common/world.h"
#include "entrypoint/program.h"

namespace mrcnn::entrypoint {

struct TrainOptions {
  std::optional<std::string> base_dir;
  std::optional<int> nproc_per_node;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<double> grace_period_s;  // else MRCNN_GRACE_PERIOD, else 110
  std::optional<double> peer_timeout_s;  // else MRCNN_PEER_TIMEOUT, else 900
  bool rank_prefix = false;              // or MRCNN_RANK_PREFIX=1
  std::optional<std::string> trainer;
  std::vector<std::string> extra_args;
};

struct ChildPlan {
  int local_rank = 0;
  int rank = 0;
  common::EnvMap added_env;  // SM_*, torchrun variables, PYTHONUNBUFFERED, *_SOCKET_IFNAME
};

struct LaunchPlan {
  common::JobEnvironment job;
  common::World world;
  ProgramChoice program;
  std::vector<ChildPlan> children;
  std::chrono::milliseconds grace{110'000};
  std::chrono::milliseconds peer_timeout{900'000};
  bool rank_prefix = false;
  // Multi-host launches by a per-node launcher wait for peers; a per-process
  // launcher (torchrun, mpirun) has done that already and starts one child.
  bool wait_for_peers = false;
  int rendezvous_port = 0;
  // What the log should say before anything starts: settings of the job that were
  // ignored, with the reason (`train` and `env` write them to stderr).
  std::vector<std::string> notes;
};

// Output/failure location even when the rest of the configuration is broken.
common::JobPaths ResolvePaths(const TrainOptions& options, const common::EnvMap& env);

// Throws common::ConfigError.
LaunchPlan MakeLaunchPlan(const TrainOptions& options, const common::EnvMap& env);

// The child's full environment: ours with the plan's additions on top.
std::vector<std::string> ChildEnvironment(const common::EnvMap& base, const ChildPlan& child);

}  // namespace mrcnn::entrypoint
