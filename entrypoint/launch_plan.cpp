#include "entrypoint/launch_plan.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "common/config_error.h"
#include "common/socket_interface.h"
#include "common/training_env.h"

namespace mrcnn::entrypoint {
namespace {

using common::ConfigError;

std::chrono::milliseconds Seconds(const std::optional<double>& flag, const std::string& flag_name,
                                  const common::EnvMap& env, const std::string& variable,
                                  double fallback) {
  double seconds = fallback;
  std::string source = "default";
  if (flag) {
    seconds = *flag;
    source = flag_name;
  } else if (auto value = common::Lookup(env, variable); value && !value->empty()) {
    const char* end = value->data() + value->size();
    auto [ptr, ec] = std::from_chars(value->data(), end, seconds);
    if (ec != std::errc{} || ptr != end) {
      throw ConfigError("environment", variable,
                        fmt::format("must be a number of seconds, got \"{}\"", *value));
    }
    source = variable;
  }
  if (!std::isfinite(seconds) || seconds < 0) {
    throw ConfigError(source == variable ? "environment" : "command line", source,
                      fmt::format("must be a number of seconds >= 0, got {}", seconds));
  }
  return std::chrono::milliseconds(static_cast<long>(std::llround(seconds * 1000)));
}

int IntVariable(const common::EnvMap& env, const std::string& variable, int fallback) {
  return static_cast<int>(common::EnvInteger(env, variable, std::numeric_limits<int>::min(),
                                             std::numeric_limits<int>::max())
                              .value_or(fallback));
}

}  // namespace

common::JobPaths ResolvePaths(const TrainOptions& options, const common::EnvMap& env) {
  return common::MakeJobPaths(common::ResolveBaseDir(options.base_dir, env));
}

LaunchPlan MakeLaunchPlan(const TrainOptions& options, const common::EnvMap& env) {
  LaunchPlan plan;
  const auto paths = ResolvePaths(options, env);
  plan.job = common::LoadJobEnvironment(paths.base, env);
  common::WorldOverrides overrides;
  overrides.nproc_per_node = options.nproc_per_node;
  overrides.master_addr = options.master_addr;
  overrides.master_port = options.master_port;
  plan.world = common::ResolveWorld(plan.job, env, overrides);

  ProgramOptions program_options;
  program_options.trainer = options.trainer;
  program_options.self_dir = SelfDirectory();
  program_options.extra_args = options.extra_args;
  plan.program = ResolveProgram(plan.job, env, program_options);

  plan.grace = Seconds(options.grace_period_s, "--grace-period", env, "MRCNN_GRACE_PERIOD", 110);
  plan.peer_timeout =
      Seconds(options.peer_timeout_s, "--peer-timeout", env, "MRCNN_PEER_TIMEOUT", 900);
  plan.rank_prefix = options.rank_prefix || common::Lookup(env, "MRCNN_RANK_PREFIX") == "1";

  // A launcher that already started one copy of us per process slot (torchrun, mpirun
  // or srun with several tasks per node) fixes our local rank; everything else
  // (SageMaker, Kubeflow, one task per node) runs one child per slot. The world decides
  // (common/world.h), so Open MPI with one process per node still gets every slot.
  std::vector<int> local_ranks;
  if (plan.world.launched_local_rank) {
    local_ranks = {*plan.world.launched_local_rank};
  } else {
    for (int i = 0; i < plan.world.nproc_per_node; ++i)
      local_ranks.push_back(i);
    plan.wait_for_peers = plan.world.nnodes > 1;
  }
  plan.rendezvous_port = IntVariable(env, "MRCNN_RENDEZVOUS_PORT", plan.world.master_port + 1);
  if (plan.rendezvous_port <= 0 || plan.rendezvous_port > 65535) {
    throw ConfigError("environment", "MRCNN_RENDEZVOUS_PORT",
                      fmt::format("must be a TCP port (MASTER_PORT + 1 by default), got {}",
                                  plan.rendezvous_port));
  }

  const common::EnvMap job_variables =
      common::TrainingEnvironmentVariables(plan.job, plan.world, plan.program.user_entry_point);
  // SM_NETWORK_INTERFACE_NAME keeps what the file says (the toolkit's byte for byte); only
  // what NCCL and Gloo act on is left out when the host lacks the interface.
  const common::SocketInterface socket_interface = common::SocketInterfaceVariables(
      plan.job.resources, env, plan.job.paths.input_config / "resourceconfig.json");
  if (socket_interface.note)
    plan.notes.push_back(*socket_interface.note);
  for (int local_rank : local_ranks) {
    ChildPlan child;
    child.local_rank = local_rank;
    child.rank = plan.world.node_rank * plan.world.nproc_per_node + local_rank;
    child.added_env = job_variables;
    for (auto& [key, value] : common::ProcessVariables(plan.world, local_rank))
      child.added_env[key] = value;
    for (const auto& [key, value] : socket_interface.variables)
      child.added_env[key] = value;
    child.added_env.insert_or_assign(std::string("PYTHONUNBUFFERED"), std::string("1"));
    // The base dir may come from --base-dir, which children cannot see otherwise; the
    // trainer and the public toolkit both read it from here.
    child.added_env.insert_or_assign(std::string("SAGEMAKER_BASE_DIR"),
                                     plan.job.paths.base.string());
    plan.children.push_back(std::move(child));
  }
  return plan;
}

std::vector<std::string> ChildEnvironment(const common::EnvMap& base, const ChildPlan& child) {
  common::EnvMap merged = base;
  for (const auto& [key, value] : child.added_env)
    merged[key] = value;
  std::vector<std::string> env;
  env.reserve(merged.size());
  for (const auto& [key, value] : merged) {
    // Appends rather than key + "=" + value: GCC 12 reports a false -Wrestrict on the latter.
    std::string entry;
    entry.reserve(key.size() + value.size() + 1);
    entry.append(key).append("=").append(value);
    env.push_back(std::move(entry));
  }
  return env;
}

}  // namespace mrcnn::entrypoint
