#pragma once
// Who we are in a distributed job: node rank, node count, processes per node,
// master address and port.
//
// Precedence (first match wins; common/README.md "The world" has the details):
//   1. explicit overrides (command-line flags) for the fields they set;
//   2. torchrun-launched: LOCAL_RANK, RANK, WORLD_SIZE and GROUP_RANK all set —
//      node_rank = GROUP_RANK, nproc_per_node = LOCAL_WORLD_SIZE, and this
//      process already is the slot LOCAL_RANK;
//   3. Kubeflow PyTorchJob: PET_NNODES or PET_NODE_RANK set, or MASTER_ADDR +
//      WORLD_SIZE + RANK where RANK is the node index. nnodes = PET_NNODES, else
//      WORLD_SIZE / PET_NPROC_PER_NODE when that is a number (the operator's
//      WORLD_SIZE counts processes then), else WORLD_SIZE;
//   4. Open MPI: OMPI_COMM_WORLD_RANK and _SIZE set. With LOCAL_SIZE 1 mpirun
//      started one supervisor per node (node = RANK, nnodes = SIZE); with more,
//      each process already is one slot (node = RANK / LOCAL_SIZE,
//      nproc_per_node = LOCAL_SIZE);
//   5. Slurm: SLURM_NODEID set; nnodes = SLURM_NNODES or SLURM_JOB_NUM_NODES,
//      hosts = SLURM_JOB_NODELIST (or SLURM_NODELIST) expanded; with more tasks
//      than nodes each task already is one slot (SLURM_LOCALID);
//   6. SageMaker resourceconfig.json present: node_rank = index of current_host
//      in its hosts as written, nnodes = len(hosts), master = hosts[0];
//   7. single node.
// Processes per node (where the launcher does not fix it): overrides, then
// PET_NPROC_PER_NODE (a number; "cpu" = CPU count; "auto"/"gpu" fall through),
// then hyperparameter sagemaker_mpi_num_of_processes_per_host, then the number
// of GPUs, then 1. An override that contradicts a launcher that fixes it is a
// ConfigError.
// master_addr: overrides, then the launcher's (torchrun/Kubeflow MASTER_ADDR;
// Open MPI and Slurm: env MASTER_ADDR, else SageMaker hosts[0] / the first
// Slurm host), then 127.0.0.1 for one node.
// master_port: overrides, then env MASTER_PORT (Kubeflow: PET_MASTER_PORT
// too), then 29500.
// Bad values (non-integers, ranks out of range, non-positive sizes, sizes that
// do not divide) throw ConfigError naming the environment variable.
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
  // This node's name, for logs and failure reports: resourceconfig's
  // current_host when that file exists (and for single-node runs), Slurm's
  // SLURMD_NODENAME, else HOSTNAME / gethostname().
  std::string current_host;
  // Set when a launcher (torchrun, Open MPI or Slurm with several processes per
  // node) already started one process per slot: this process is that slot and
  // runs exactly one child with this local rank instead of nproc_per_node.
  std::optional<int> launched_local_rank;
  std::string run_id = "none";  // TORCHELASTIC_RUN_ID: the inherited one, else TRAINING_JOB_NAME
  // torchrun's attempt number and restart budget, passed on to the child unchanged (an
  // attempt > 0 resumes from the newest checkpoint and uses the agent store's keys of its
  // attempt); 0 under every other launcher.
  int restart_count = 0;
  int max_restarts = 0;
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

// The torchrun variables for the child at local_rank (0 <= local_rank <
// nproc_per_node, else std::out_of_range): RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// ROLE_NAME, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS (the world's). torchrun's own
// TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_ERROR_FILE are not set here: under
// torchrun the child inherits them with the rest of the environment.
EnvMap ProcessVariables(const World& world, int local_rank);

}  // namespace mrcnn::common
