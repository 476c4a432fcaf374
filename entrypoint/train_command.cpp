#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>

#include "common/config_error.h"
#include "common/world.h"
#include "entrypoint/commands.h"
#include "entrypoint/failure_report.h"
#include "entrypoint/fd_io.h"
#include "entrypoint/peer_wait.h"
#include "entrypoint/signal_channel.h"
#include "entrypoint/signals_to_handle.h"
#include "entrypoint/supervisor.h"
#include "entrypoint/torchelastic_error_file.h"

namespace mrcnn::entrypoint {
namespace {

// torchrun's per-worker error file, or empty when not under torchrun.
std::filesystem::path TorchelasticErrorFile(const common::EnvMap& env) {
  const auto file = common::Lookup(env, "TORCHELASTIC_ERROR_FILE");
  return file ? std::filesystem::path(*file) : std::filesystem::path();
}

int Fail(const common::JobPaths& paths, const common::EnvMap& env, int code,
         const std::string& message) {
  LogLine(message);
  WriteFailureOnce(paths.failure, message + "\n");
  if (const auto file = TorchelasticErrorFile(env); !file.empty())
    WriteTorchelasticErrorFile(file, message + "\n", std::chrono::system_clock::now());
  return code;
}

// Returns the listener the master keeps open while the job runs (null on workers).
std::unique_ptr<RendezvousListener> WaitForPeers(const LaunchPlan& plan, SignalChannel& signals,
                                                 int& stop_signal) {
  PeerWaitPlan peers;
  peers.hosts = plan.world.hosts;
  if (peers.hosts.empty())
    peers.hosts = {plan.world.master_addr};
  peers.master_addr = plan.world.master_addr;
  peers.rendezvous_port = plan.rendezvous_port;
  peers.node_rank = plan.world.node_rank;
  peers.nnodes = plan.world.nnodes;
  peers.timeout = plan.peer_timeout;
  const auto deadline = std::chrono::steady_clock::now() + plan.peer_timeout;
  const Sleeper sleep = [&signals, &stop_signal](std::chrono::milliseconds duration) {
    const auto signal = signals.SleepUnlessStopped(duration);
    if (signal)
      stop_signal = *signal;
    return !signal.has_value();
  };
  std::unique_ptr<RendezvousListener> listener;
  if (plan.world.node_rank == 0) {
    listener = std::make_unique<RendezvousListener>(peers.master_addr, peers.rendezvous_port,
                                                    peers.nnodes);
    LogLine(fmt::format("node 0 of {}: waiting for the other nodes on {}:{} (up to {} s)",
                        peers.nnodes, peers.master_addr, peers.rendezvous_port,
                        plan.peer_timeout.count() / 1000));
  } else {
    LogLine(fmt::format("node {} of {}: waiting for the master {}:{} (up to {} s)", peers.node_rank,
                        peers.nnodes, peers.master_addr, peers.rendezvous_port,
                        plan.peer_timeout.count() / 1000));
  }
  WaitForHostsToResolve(peers, deadline, sleep);
  if (listener) {
    WaitForWorkers(*listener, peers, deadline, sleep);
  } else {
    CheckInWithMaster(peers, deadline, sleep);
  }
  return listener;
}

}  // namespace

int RunTrain(const TrainOptions& options) {
  const common::EnvMap env = common::CurrentEnvironment();
  common::JobPaths paths;
  try {
    paths = ResolvePaths(options, env);
  } catch (const std::exception& error) {
    LogLine(fmt::format("configuration error: {}", error.what()));
    return kExitConfigError;
  }
  // Signals are ours from here on, so a stop during the peer wait is honoured
  // (as PID 1 the default action of SIGTERM would be to ignore it).
  const SignalsToHandle to_handle =
      ParseSignalsToHandle(common::Lookup(env, "TORCHELASTIC_SIGNALS_TO_HANDLE").value_or(""));
  for (const std::string& warning : to_handle.warnings)
    LogLine(warning);
  SignalChannel signals(to_handle.extra);
  LaunchPlan plan;
  try {
    plan = MakeLaunchPlan(options, env);
  } catch (const common::ConfigError& error) {
    return Fail(paths, env, kExitConfigError, fmt::format("configuration error: {}", error.what()));
  } catch (const std::exception& error) {
    return Fail(paths, env, kExitConfigError, fmt::format("configuration error: {}", error.what()));
  }
  for (const std::string& note : plan.notes)
    LogLine(note);

  std::unique_ptr<RendezvousListener> listener;
  if (plan.wait_for_peers) {
    int stop_signal = SIGTERM;
    try {
      listener = WaitForPeers(plan, signals, stop_signal);
    } catch (const PeerWaitStopped& error) {
      // Stopped by the platform before anything ran: no failure to report.
      LogLine(error.what());
      return 128 + stop_signal;
    } catch (const PeerWaitError& error) {
      return Fail(paths, env, kExitPeerWait,
                  fmt::format("host {} (node {} of {}): {}", plan.world.current_host,
                              plan.world.node_rank, plan.world.nnodes, error.what()));
    }
  }

  SupervisorOptions supervisor_options;
  supervisor_options.grace = plan.grace;
  supervisor_options.rank_prefix = plan.rank_prefix;
  supervisor_options.host = plan.world.current_host.empty() ? "localhost" : plan.world.current_host;
  supervisor_options.failure_file = paths.failure;
  if (plan.world.launcher == common::Launcher::kTorchrun &&
      plan.world.restart_count < plan.world.max_restarts) {
    // torchrun restarts the workers after a failure while restarts remain: this attempt's
    // failure is not the job's, and output/failure is written once, never replaced. The
    // error file is per attempt, so torchrun still sees this attempt's root cause.
    supervisor_options.failure_file.clear();
    LogLine(
        fmt::format("torchrun attempt {} (up to {} restarts): a failure of this attempt "
                    "goes to TORCHELASTIC_ERROR_FILE only; output/failure is left to the last "
                    "attempt",
                    plan.world.restart_count, plan.world.max_restarts));
  }
  supervisor_options.torchelastic_error_file = TorchelasticErrorFile(env);
  Supervisor supervisor(supervisor_options, signals);
  if (listener) {
    RendezvousListener* raw = listener.get();
    supervisor.Watch(raw->fd(), [raw] { raw->AnswerPending(); });
  }

  std::vector<SupervisedChild> children;
  for (const ChildPlan& child : plan.children) {
    SupervisedChild supervised;
    supervised.rank = child.rank;
    supervised.local_rank = child.local_rank;
    supervised.spec.argv = plan.program.argv;
    supervised.spec.env = ChildEnvironment(env, child);
    supervised.spec.working_dir = plan.program.working_dir;
    children.push_back(std::move(supervised));
  }
  LogLine(fmt::format("{}: node {} of {}, starting {} process(es): {}",
                      common::LauncherName(plan.world.launcher), plan.world.node_rank,
                      plan.world.nnodes, children.size(), plan.program.argv.front()));
  const int code = supervisor.Run(std::move(children));
  if (code != 0)
    LogLine(fmt::format("exiting with code {}", code));
  return code;
}

}  // namespace mrcnn::entrypoint
