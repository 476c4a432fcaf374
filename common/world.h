#pragma once
// Who we are in a distributed job: node rank, node count, processes per node,
// master address and port.
//
// Precedence (first match wins; see common/README.md "The world"):
//   1. explicit overrides (command-line flags) for the fields they set;
//   2. torchrun-launched: LOCAL_RANK, RANK, WORLD_SIZE and GROUP_RANK all set —
//      node_rank = GROUP_RANK, nproc_per_node = LOCAL_WORLD_SIZE;
//   3. Kubeflow PyTorchJob: PET_NNODES / PET_NODE_RANK, or MASTER_ADDR +
//      WORLD_SIZE + RANK where RANK is the node index;
//   4. Open MPI: OMPI_COMM_WORLD_* (node = RANK / LOCAL_SIZE);
//   5. Slurm: SLURM_NODEID, SLURM_NNODES or SLURM_JOB_NUM_NODES, master = first
//      host of SLURM_JOB_NODELIST (bracket ranges expanded);
//   6. SageMaker resourceconfig.json present: node_rank = index of current_host
//      in the sorted hosts, master = hosts[0];
//   7. single node.
// Processes per node: overrides.nproc_per_node, then PET_NPROC_PER_NODE, then
// hyperparameter sagemaker_mpi_num_of_processes_per_host, then the number of
// GPUs, then 1 (a launcher that fixes it, torchrun or MPI, wins over the last three).
// MASTER_PORT: overrides, then env MASTER_PORT, then 29500.
// Bad values (non-integers, ranks out of range, non-positive sizes) throw
// ConfigError naming the environment variable.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/env_map.h"
#include "common/job_environment.h"

namespace mrcnn::common {

enum class Launcher { kSageMaker, kKubeflow, kTorchrun, kOpenMpi, kSlurm, kSingle };

std::string_view LauncherName(Launcher launcher);

struct World {
  Launcher launcher = Launcher::kSingle;
  int node_rank = 0;
  int nnodes = 1;
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::vector<std::string> hosts;  // known host names in node order (may be empty)
  std::string current_host;
  int WorldSize() const { return nnodes * nproc_per_node; }
};

struct WorldOverrides {
  std::optional<int> nproc_per_node;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

World ResolveWorld(const JobEnvironment& job, const EnvMap& env, const WorldOverrides& overrides);

// Expands a Slurm hostlist ("algo-[1-3,5],gpu07") into host names in order.
// Throws ConfigError (source SLURM_JOB_NODELIST) when malformed.
std::vector<std::string> ExpandSlurmNodeList(const std::string& nodelist);

// The torchrun variables for the child at local_rank: RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK,
// ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID.
EnvMap ProcessVariables(const World& world, int local_rank);

}  // namespace mrcnn::common
