#include "common/world.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <stdexcept>

#include "common/config_error.h"

namespace mrcnn::common {
namespace {

constexpr char kEnv[] = "environment";

// The integer in env[key]; nullopt when unset. Set but empty is an error here: a launcher
// that sets a rank variable sets it to a number.
std::optional<int> EnvInt(const EnvMap& env, const std::string& key) {
  const auto value = EnvInteger(env, key, std::numeric_limits<int>::min(),
                                std::numeric_limits<int>::max(), EmptyEnv::kError);
  return value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
}

int RequireEnvInt(const EnvMap& env, const std::string& key, const std::string& why) {
  const auto value = EnvInt(env, key);
  if (!value)
    throw ConfigError(kEnv, key, "is not set; it is required " + why);
  return *value;
}

void RequirePositive(int value, const std::string& key) {
  if (value < 1)
    throw ConfigError(kEnv, key, fmt::format("must be at least 1, got {}", value));
}

void RequireRank(int rank, int size, const std::string& key, const std::string& size_desc) {
  if (rank < 0 || rank >= size) {
    throw ConfigError(kEnv, key,
                      fmt::format("must be in [0, {}) ({}), got {}", size, size_desc, rank));
  }
}

bool Has(const EnvMap& env, const std::string& key) {
  return env.count(key) != 0;
}

std::string LocalHostName(const EnvMap& env) {
  if (auto name = Lookup(env, "HOSTNAME"); name && !name->empty())
    return *name;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0')
    return buf;
  return "localhost";
}

// Processes per node where no launcher fixes it: PET_NPROC_PER_NODE, the MPI
// hyperparameter, the GPU count, 1. (Overrides are applied by the caller.)
int DefaultProcsPerNode(const JobEnvironment& job, const EnvMap& env) {
  if (const auto pet = Lookup(env, "PET_NPROC_PER_NODE")) {
    if (*pet == "cpu")
      return std::max(1, job.num_cpus);
    if (*pet != "auto" && *pet != "gpu") {
      const int n = *EnvInt(env, "PET_NPROC_PER_NODE");
      RequirePositive(n, "PET_NPROC_PER_NODE");
      return n;
    }
  }
  const auto& framework = job.hyperparameters.framework;
  if (const auto it = framework.find("sagemaker_mpi_num_of_processes_per_host");
      it != framework.end()) {
    const std::string field = "sagemaker_mpi_num_of_processes_per_host";
    const std::string file = (job.paths.input_config / "hyperparameters.json").string();
    std::optional<int64_t> n;
    if (it->is_number_integer()) {
      n = it->get<int64_t>();
    } else if (it->is_number_float() &&
               it->get<double>() == static_cast<double>(static_cast<int64_t>(it->get<double>()))) {
      n = static_cast<int64_t>(it->get<double>());
    }
    if (!n)
      throw ConfigError(file, field, "must be an integer, got " + it->dump());
    if (*n < 1 || *n > 4096)
      throw ConfigError(file, field, fmt::format("must be in [1, 4096], got {}", *n));
    return static_cast<int>(*n);
  }
  return job.num_gpus > 0 ? job.num_gpus : 1;
}

int MasterPortFromEnv(const EnvMap& env, bool kubeflow) {
  std::optional<int> port;
  std::string key = "MASTER_PORT";
  if (Has(env, "MASTER_PORT")) {
    port = EnvInt(env, "MASTER_PORT");
  } else if (kubeflow && Has(env, "PET_MASTER_PORT")) {
    key = "PET_MASTER_PORT";
    port = EnvInt(env, key);
  }
  if (!port)
    return 29500;
  if (*port < 1 || *port > 65535)
    throw ConfigError(kEnv, key, fmt::format("must be a TCP port in [1, 65535], got {}", *port));
  return *port;
}

// A launcher fixed nproc_per_node; an override may only agree with it.
void CheckNprocOverride(const WorldOverrides& overrides, int fixed, const std::string& source) {
  if (overrides.nproc_per_node && *overrides.nproc_per_node != fixed) {
    throw ConfigError(
        kEnv, source,
        fmt::format(
            "fixes {} processes per node, which contradicts --nproc-per-node {}; drop one of them",
            fixed, *overrides.nproc_per_node));
  }
}

World FromTorchrun(const EnvMap& env, const WorldOverrides& overrides) {
  World w;
  w.launcher = Launcher::kTorchrun;
  const int local_rank = *EnvInt(env, "LOCAL_RANK");
  const int rank = *EnvInt(env, "RANK");
  const int world_size = *EnvInt(env, "WORLD_SIZE");
  const int group_rank = *EnvInt(env, "GROUP_RANK");
  const int local_world =
      RequireEnvInt(env, "LOCAL_WORLD_SIZE", "when torchrun launched this process");
  RequirePositive(world_size, "WORLD_SIZE");
  RequirePositive(local_world, "LOCAL_WORLD_SIZE");
  if (world_size % local_world != 0) {
    throw ConfigError(
        kEnv, "WORLD_SIZE",
        fmt::format(
            "({}) must be a multiple of LOCAL_WORLD_SIZE ({}); nodes with different process "
            "counts are not supported",
            world_size, local_world));
  }
  w.nnodes = world_size / local_world;
  if (const auto gws = EnvInt(env, "GROUP_WORLD_SIZE"); gws && *gws != w.nnodes) {
    throw ConfigError(
        kEnv, "GROUP_WORLD_SIZE",
        fmt::format("must equal WORLD_SIZE / LOCAL_WORLD_SIZE = {}, got {}", w.nnodes, *gws));
  }
  RequireRank(local_rank, local_world, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  RequireRank(group_rank, w.nnodes, "GROUP_RANK", "WORLD_SIZE / LOCAL_WORLD_SIZE");
  RequireRank(rank, world_size, "RANK", "WORLD_SIZE");
  if (rank != group_rank * local_world + local_rank) {
    throw ConfigError(
        kEnv, "RANK",
        fmt::format("must equal GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK = {}, got {}",
                    group_rank * local_world + local_rank, rank));
  }
  CheckNprocOverride(overrides, local_world, "LOCAL_WORLD_SIZE");
  w.node_rank = group_rank;
  w.nproc_per_node = local_world;
  w.launched_local_rank = local_rank;
  w.master_addr = Lookup(env, "MASTER_ADDR").value_or("127.0.0.1");
  w.master_port = MasterPortFromEnv(env, false);
  if (auto run_id = Lookup(env, "TORCHELASTIC_RUN_ID"); run_id && !run_id->empty())
    w.run_id = *run_id;
  w.restart_count = EnvInt(env, "TORCHELASTIC_RESTART_COUNT").value_or(0);
  w.max_restarts = EnvInt(env, "TORCHELASTIC_MAX_RESTARTS").value_or(0);
  if (w.restart_count < 0)
    throw ConfigError(kEnv, "TORCHELASTIC_RESTART_COUNT", "must be >= 0");
  if (w.max_restarts < 0)
    throw ConfigError(kEnv, "TORCHELASTIC_MAX_RESTARTS", "must be >= 0");
  return w;
}

int ParseNnodesSpec(const EnvMap& env) {
  // torchrun accepts "N" or "MIN:MAX"; only a fixed size is meaningful without a rendezvous.
  const std::string raw = *Lookup(env, "PET_NNODES");
  const auto colon = raw.find(':');
  if (colon == std::string::npos)
    return *EnvInt(env, "PET_NNODES");
  const EnvMap parts = {{"PET_NNODES", raw.substr(0, colon)}};
  const EnvMap max_part = {{"PET_NNODES", raw.substr(colon + 1)}};
  const int lo = *EnvInt(parts, "PET_NNODES");
  const int hi = *EnvInt(max_part, "PET_NNODES");
  if (lo != hi) {
    throw ConfigError(
        kEnv, "PET_NNODES",
        fmt::format(
            "is an elastic range \"{}\"; elastic training is not supported, set a fixed node count",
            raw));
  }
  return lo;
}

World FromKubeflow(const EnvMap& env, int nproc) {
  World w;
  w.launcher = Launcher::kKubeflow;
  w.nproc_per_node = nproc;
  std::string nnodes_key;
  if (Has(env, "PET_NNODES")) {
    nnodes_key = "PET_NNODES";
    w.nnodes = ParseNnodesSpec(env);
  } else {
    nnodes_key = "WORLD_SIZE";
    const int world_size =
        RequireEnvInt(env, "WORLD_SIZE", "for a Kubeflow PyTorchJob without PET_NNODES");
    RequirePositive(world_size, "WORLD_SIZE");
    const auto pet_nproc = Lookup(env, "PET_NPROC_PER_NODE");
    const bool nproc_numeric =
        pet_nproc && *pet_nproc != "auto" && *pet_nproc != "gpu" && *pet_nproc != "cpu";
    if (nproc_numeric) {
      // The operator multiplies replicas by a numeric nprocPerNode.
      const int per_node = *EnvInt(env, "PET_NPROC_PER_NODE");
      if (world_size % per_node != 0) {
        throw ConfigError(kEnv, "WORLD_SIZE",
                          fmt::format("({}) must be a multiple of PET_NPROC_PER_NODE ({})",
                                      world_size, per_node));
      }
      w.nnodes = world_size / per_node;
    } else {
      w.nnodes = world_size;  // one replica per count: WORLD_SIZE is the number of pods
    }
  }
  RequirePositive(w.nnodes, nnodes_key);
  const std::string rank_key = Has(env, "PET_NODE_RANK") ? "PET_NODE_RANK" : "RANK";
  w.node_rank = RequireEnvInt(env, rank_key, "for a Kubeflow PyTorchJob (the node index)");
  RequireRank(w.node_rank, w.nnodes, rank_key, "the node count " + nnodes_key);
  auto master = Lookup(env, "MASTER_ADDR");
  if (!master || master->empty())
    master = Lookup(env, "PET_MASTER_ADDR");
  if (master && !master->empty()) {
    w.master_addr = *master;
  } else if (w.nnodes > 1) {
    throw ConfigError(kEnv, "MASTER_ADDR",
                      "is not set; a multi-node Kubeflow PyTorchJob needs the master's address");
  }
  w.master_port = MasterPortFromEnv(env, true);
  w.current_host = LocalHostName(env);
  return w;
}

World FromOpenMpi(const JobEnvironment& job, const EnvMap& env, const WorldOverrides& overrides) {
  World w;
  w.launcher = Launcher::kOpenMpi;
  const int rank = *EnvInt(env, "OMPI_COMM_WORLD_RANK");
  const int size = *EnvInt(env, "OMPI_COMM_WORLD_SIZE");
  const std::string why = "under Open MPI (mpirun sets it)";
  const int local_rank = RequireEnvInt(env, "OMPI_COMM_WORLD_LOCAL_RANK", why);
  const int local_size = RequireEnvInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE", why);
  RequirePositive(size, "OMPI_COMM_WORLD_SIZE");
  RequirePositive(local_size, "OMPI_COMM_WORLD_LOCAL_SIZE");
  RequireRank(rank, size, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  RequireRank(local_rank, local_size, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (size % local_size != 0) {
    throw ConfigError(
        kEnv, "OMPI_COMM_WORLD_SIZE",
        fmt::format(
            "({}) must be a multiple of OMPI_COMM_WORLD_LOCAL_SIZE ({}); nodes with different "
            "process counts are not supported",
            size, local_size));
  }
  if (rank % local_size != local_rank) {
    throw ConfigError(
        kEnv, "OMPI_COMM_WORLD_LOCAL_RANK",
        fmt::format(
            "must equal OMPI_COMM_WORLD_RANK % OMPI_COMM_WORLD_LOCAL_SIZE = {} (ranks must be "
            "placed by node, mpirun --map-by slot), got {}",
            rank % local_size, local_rank));
  }
  w.nnodes = size / local_size;
  w.node_rank = rank / local_size;
  if (local_size > 1) {
    CheckNprocOverride(overrides, local_size, "OMPI_COMM_WORLD_LOCAL_SIZE");
    w.nproc_per_node = local_size;
    w.launched_local_rank = local_rank;
  }
  if (auto master = Lookup(env, "MASTER_ADDR"); master && !master->empty()) {
    w.master_addr = *master;
  } else if (job.resources.present) {
    w.master_addr =
        job.resources.hosts.front();  // SageMaker's MPI mode: hosts come from resourceconfig
    w.hosts = job.resources.hosts;
  } else if (w.nnodes > 1) {
    throw ConfigError(kEnv, "MASTER_ADDR",
                      "is not set; a multi-node Open MPI job needs it (mpirun -x MASTER_ADDR=...)");
  }
  w.master_port = MasterPortFromEnv(env, false);
  w.current_host = job.resources.present ? job.resources.current_host : LocalHostName(env);
  return w;
}

World FromSlurm(const EnvMap& env, const WorldOverrides& overrides) {
  World w;
  w.launcher = Launcher::kSlurm;
  const std::string nnodes_key = Has(env, "SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES";
  w.nnodes = RequireEnvInt(env, nnodes_key,
                           "under Slurm (the node count; SLURM_NNODES or SLURM_JOB_NUM_NODES)");
  RequirePositive(w.nnodes, nnodes_key);
  w.node_rank = *EnvInt(env, "SLURM_NODEID");
  RequireRank(w.node_rank, w.nnodes, "SLURM_NODEID", nnodes_key);

  const std::string list_key =
      Has(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
  if (const auto nodelist = Lookup(env, list_key)) {
    w.hosts = ExpandSlurmNodeList(*nodelist);
    if (static_cast<int>(w.hosts.size()) < w.nnodes) {
      throw ConfigError(
          kEnv, list_key,
          fmt::format("names {} hosts but {} is {}", w.hosts.size(), nnodes_key, w.nnodes));
    }
  }
  if (auto master = Lookup(env, "MASTER_ADDR"); master && !master->empty()) {
    w.master_addr = *master;
  } else if (!w.hosts.empty()) {
    w.master_addr = w.hosts.front();
  } else if (w.nnodes > 1) {
    throw ConfigError(kEnv, "SLURM_JOB_NODELIST",
                      "is not set; a multi-node Slurm job needs it or MASTER_ADDR");
  }

  const auto ntasks = EnvInt(env, "SLURM_NTASKS");
  if (ntasks && *ntasks > w.nnodes) {
    // srun started several tasks per node: each task is one slot.
    if (*ntasks % w.nnodes != 0) {
      throw ConfigError(
          kEnv, "SLURM_NTASKS",
          fmt::format(
              "({}) must be a multiple of {} ({}); nodes with different task counts are not "
              "supported",
              *ntasks, nnodes_key, w.nnodes));
    }
    const int per_node = *ntasks / w.nnodes;
    const std::string why = "when Slurm runs several tasks per node";
    const int local_id = RequireEnvInt(env, "SLURM_LOCALID", why);
    const int proc_id = RequireEnvInt(env, "SLURM_PROCID", why);
    RequireRank(local_id, per_node, "SLURM_LOCALID", "SLURM_NTASKS / node count");
    if (proc_id != w.node_rank * per_node + local_id) {
      throw ConfigError(
          kEnv, "SLURM_PROCID",
          fmt::format(
              "must equal SLURM_NODEID * tasks per node + SLURM_LOCALID = {} (use the block "
              "distribution, srun -m block), got {}",
              w.node_rank * per_node + local_id, proc_id));
    }
    CheckNprocOverride(overrides, per_node, "SLURM_NTASKS");
    w.nproc_per_node = per_node;
    w.launched_local_rank = local_id;
  }
  w.master_port = MasterPortFromEnv(env, false);
  if (auto node_name = Lookup(env, "SLURMD_NODENAME"); node_name && !node_name->empty()) {
    w.current_host = *node_name;
  } else if (static_cast<int>(w.hosts.size()) > w.node_rank) {
    w.current_host = w.hosts[static_cast<size_t>(w.node_rank)];
  } else {
    w.current_host = LocalHostName(env);
  }
  return w;
}

World FromSageMaker(const JobEnvironment& job, const EnvMap& env) {
  World w;
  w.launcher = Launcher::kSageMaker;
  w.hosts = job.resources.hosts;
  w.current_host = job.resources.current_host;
  const auto it = std::find(w.hosts.begin(), w.hosts.end(), w.current_host);
  w.node_rank = static_cast<int>(it - w.hosts.begin());
  w.nnodes = static_cast<int>(w.hosts.size());
  w.master_addr = w.nnodes > 1 ? w.hosts.front() : "127.0.0.1";
  w.master_port = MasterPortFromEnv(env, false);
  return w;
}

}  // namespace

std::string_view LauncherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::kSageMaker:
      return "sagemaker";
    case Launcher::kKubeflow:
      return "kubeflow";
    case Launcher::kTorchrun:
      return "torchrun";
    case Launcher::kOpenMpi:
      return "openmpi";
    case Launcher::kSlurm:
      return "slurm";
    case Launcher::kSingle:
      return "single";
  }
  return "unknown";
}

World ResolveWorld(const JobEnvironment& job, const EnvMap& env, const WorldOverrides& overrides) {
  if (overrides.nproc_per_node && *overrides.nproc_per_node < 1) {
    throw ConfigError("command line", "--nproc-per-node",
                      fmt::format("must be at least 1, got {}", *overrides.nproc_per_node));
  }
  if (overrides.master_port && (*overrides.master_port < 1 || *overrides.master_port > 65535)) {
    throw ConfigError(
        "command line", "--master-port",
        fmt::format("must be a TCP port in [1, 65535], got {}", *overrides.master_port));
  }
  const auto default_nproc = [&] {
    return overrides.nproc_per_node.value_or(DefaultProcsPerNode(job, env));
  };

  World w;
  if (Has(env, "LOCAL_RANK") && Has(env, "RANK") && Has(env, "WORLD_SIZE") &&
      Has(env, "GROUP_RANK")) {
    w = FromTorchrun(env, overrides);
  } else if (Has(env, "PET_NNODES") || Has(env, "PET_NODE_RANK") ||
             (Has(env, "MASTER_ADDR") && Has(env, "WORLD_SIZE") && Has(env, "RANK"))) {
    w = FromKubeflow(env, default_nproc());
  } else if (Has(env, "OMPI_COMM_WORLD_RANK") && Has(env, "OMPI_COMM_WORLD_SIZE")) {
    w = FromOpenMpi(job, env, overrides);
    if (!w.launched_local_rank)
      w.nproc_per_node = default_nproc();
  } else if (Has(env, "SLURM_NODEID")) {
    w = FromSlurm(env, overrides);
    if (!w.launched_local_rank)
      w.nproc_per_node = default_nproc();
  } else if (job.resources.present) {
    w = FromSageMaker(job, env);
    w.nproc_per_node = default_nproc();
  } else {
    w.launcher = Launcher::kSingle;
    w.hosts = job.resources.hosts;
    w.current_host = job.resources.current_host;
    w.nproc_per_node = default_nproc();
    w.master_port = MasterPortFromEnv(env, false);
  }
  if (overrides.master_addr)
    w.master_addr = *overrides.master_addr;
  if (overrides.master_port)
    w.master_port = *overrides.master_port;
  if (w.current_host.empty()) {
    w.current_host = job.resources.present ? job.resources.current_host : LocalHostName(env);
  }
  if (w.run_id == "none" && !job.job_name.empty())
    w.run_id = job.job_name;
  return w;
}

EnvMap ProcessVariables(const World& world, int local_rank) {
  if (local_rank < 0 || local_rank >= world.nproc_per_node) {
    throw std::out_of_range(
        fmt::format("local rank {} is outside [0, {})", local_rank, world.nproc_per_node));
  }
  const int rank = world.node_rank * world.nproc_per_node + local_rank;
  const std::string rank_text = std::to_string(rank);
  const std::string world_size = std::to_string(world.WorldSize());
  return {
      {"RANK", rank_text},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", world_size},
      {"LOCAL_WORLD_SIZE", std::to_string(world.nproc_per_node)},
      {"GROUP_RANK", std::to_string(world.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(world.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", rank_text},
      {"ROLE_WORLD_SIZE", world_size},
      {"MASTER_ADDR", world.master_addr},
      {"MASTER_PORT", std::to_string(world.master_port)},
      {"TORCHELASTIC_RUN_ID", world.run_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(world.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(world.max_restarts)},
  };
}

}  // namespace mrcnn::common
