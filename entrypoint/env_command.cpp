#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/config_error.h"
#include "common/world.h"
#include "entrypoint/commands.h"
#include "entrypoint/fd_io.h"

namespace mrcnn::entrypoint {
namespace {

std::string ModeName(common::InputMode mode) {
  switch (mode) {
    case common::InputMode::kFile:
      return "File";
    case common::InputMode::kFastFile:
      return "FastFile";
    case common::InputMode::kPipe:
      return "Pipe";
  }
  return "?";
}

nlohmann::json Describe(const LaunchPlan& plan) {
  using nlohmann::json;
  const auto& world = plan.world;
  json channels = json::array();
  for (const auto& channel : plan.job.channels) {
    channels.push_back({{"name", channel.name},
                        {"dir", channel.dir.string()},
                        {"mode", ModeName(channel.mode)},
                        {"content_type", channel.content_type},
                        {"s3_distribution_type", channel.s3_distribution_type},
                        {"record_wrapper_type", channel.record_wrapper_type}});
  }
  json processes = json::array();
  for (const auto& child : plan.children) {
    processes.push_back({{"local_rank", child.local_rank}, {"rank", child.rank}});
  }
  json child_env = json::object();
  if (!plan.children.empty()) {
    for (const auto& [key, value] : plan.children.front().added_env)
      child_env[key] = value;
  }
  return {
      {"base_dir", plan.job.paths.base.string()},
      {"world",
       {{"launcher", std::string(common::LauncherName(world.launcher))},
        {"node_rank", world.node_rank},
        {"nnodes", world.nnodes},
        {"nproc_per_node", world.nproc_per_node},
        {"world_size", world.WorldSize()},
        {"master_addr", world.master_addr},
        {"master_port", world.master_port},
        {"hosts", world.hosts},
        {"current_host", world.current_host}}},
      {"channels", channels},
      {"hyperparameters",
       {{"user", plan.job.hyperparameters.user},
        {"framework", plan.job.hyperparameters.framework}}},
      {"program", {{"argv", plan.program.argv}, {"working_dir", plan.program.working_dir}}},
      {"processes", processes},
      {"wait_for_peers", plan.wait_for_peers},
      {"rendezvous_port", plan.rendezvous_port},
      {"grace_period_s", plan.grace.count() / 1000.0},
      {"peer_timeout_s", plan.peer_timeout.count() / 1000.0},
      // What the first process gets on top of the inherited environment.
      {"child_environment", child_env},
  };
}

}  // namespace

int PrintEnvironment(const TrainOptions& options) {
  try {
    const LaunchPlan plan = MakeLaunchPlan(options, common::CurrentEnvironment());
    for (const std::string& note : plan.notes)
      LogLine(note);
    std::cout << Describe(plan).dump(2) << '\n';
    return 0;
  } catch (const std::exception& error) {
    LogLine(fmt::format("configuration error: {}", error.what()));
    return kExitConfigError;
  }
}

}  // namespace mrcnn::entrypoint
