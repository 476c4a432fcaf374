#include "common/world.h"

#include <catch2/catch.hpp>

#include "common/config_error.h"

using namespace mrcnn::common;

namespace {

// A job as LoadJobEnvironment would give it, without files.
JobEnvironment Job(std::vector<std::string> hosts = {}, const std::string& current = "",
                   int gpus = 0) {
  JobEnvironment job;
  job.paths = MakeJobPaths("/opt/ml");
  job.num_gpus = gpus;
  job.num_cpus = 16;
  if (hosts.empty()) {
    job.resources.current_host = "algo-1";
    job.resources.hosts = {"algo-1"};
  } else {
    job.resources.present = true;
    job.resources.hosts = std::move(hosts);
    job.resources.current_host = current;
  }
  return job;
}

// The ConfigError's field, or "" when nothing was thrown.
std::string ErrorField(const JobEnvironment& job, const EnvMap& env,
                       const WorldOverrides& overrides = {}) {
  try {
    ResolveWorld(job, env, overrides);
  } catch (const ConfigError& e) {
    return e.field();
  }
  return "";
}

}  // namespace

TEST_CASE("world: SageMaker hosts give node rank, count and master", "[world]") {
  const auto job = Job({"algo-1", "algo-10", "algo-2"}, "algo-2", 8);
  const auto w = ResolveWorld(job, {}, {});
  CHECK(w.launcher == Launcher::kSageMaker);
  CHECK(LauncherName(w.launcher) == "sagemaker");
  CHECK(w.node_rank == 2);  // the index in hosts as given, whatever their names
  CHECK(w.nnodes == 3);
  CHECK(w.nproc_per_node == 8);
  CHECK(w.WorldSize() == 24);
  CHECK(w.master_addr == "algo-1");
  CHECK(w.master_port == 29500);
  CHECK(w.current_host == "algo-2");
  CHECK(w.hosts == std::vector<std::string>{"algo-1", "algo-10", "algo-2"});
  CHECK_FALSE(w.launched_local_rank.has_value());
}

TEST_CASE("world: one SageMaker host uses loopback as master", "[world]") {
  const auto w = ResolveWorld(Job({"algo-1"}, "algo-1"), {}, {});
  CHECK(w.launcher == Launcher::kSageMaker);
  CHECK(w.master_addr == "127.0.0.1");
  CHECK(w.nproc_per_node == 1);
}

TEST_CASE("world: no launcher and no resourceconfig is a single node", "[world]") {
  const auto w = ResolveWorld(Job(), {}, {});
  CHECK(w.launcher == Launcher::kSingle);
  CHECK(w.node_rank == 0);
  CHECK(w.nnodes == 1);
  CHECK(w.master_addr == "127.0.0.1");
  CHECK(w.master_port == 29500);
}

TEST_CASE("world: MASTER_PORT from the environment, overrides win", "[world]") {
  const auto job = Job({"algo-1", "algo-2"}, "algo-1");
  CHECK(ResolveWorld(job, {{"MASTER_PORT", "1234"}}, {}).master_port == 1234);
  WorldOverrides o;
  o.master_port = 4321;
  o.master_addr = "10.0.0.9";
  const auto w = ResolveWorld(job, {{"MASTER_PORT", "1234"}}, o);
  CHECK(w.master_port == 4321);
  CHECK(w.master_addr == "10.0.0.9");
  CHECK(ErrorField(job, {{"MASTER_PORT", "http"}}) == "MASTER_PORT");
  CHECK(ErrorField(job, {{"MASTER_PORT", "70000"}}) == "MASTER_PORT");
  WorldOverrides bad_port;
  bad_port.master_port = 0;
  CHECK(ErrorField(job, {}, bad_port) == "--master-port");
}

TEST_CASE("world: processes per node precedence", "[world]") {
  auto job = Job({"algo-1"}, "algo-1", 4);
  job.hyperparameters.framework["sagemaker_mpi_num_of_processes_per_host"] = 3;
  WorldOverrides o;
  o.nproc_per_node = 6;
  CHECK(ResolveWorld(job, {{"PET_NPROC_PER_NODE", "5"}}, o).nproc_per_node == 6);
  CHECK(ResolveWorld(job, {{"PET_NPROC_PER_NODE", "5"}}, {}).nproc_per_node == 5);
  CHECK(ResolveWorld(job, {}, {}).nproc_per_node == 3);
  CHECK(ResolveWorld(job, {{"PET_NPROC_PER_NODE", "auto"}}, {}).nproc_per_node == 3);
  CHECK(ResolveWorld(job, {{"PET_NPROC_PER_NODE", "cpu"}}, {}).nproc_per_node == 16);
  job.hyperparameters.framework.erase("sagemaker_mpi_num_of_processes_per_host");
  CHECK(ResolveWorld(job, {}, {}).nproc_per_node == 4);
  job.num_gpus = 0;
  CHECK(ResolveWorld(job, {}, {}).nproc_per_node == 1);
}

TEST_CASE("world: bad processes-per-node values", "[world]") {
  auto job = Job();
  CHECK(ErrorField(job, {{"PET_NPROC_PER_NODE", "eight"}}) == "PET_NPROC_PER_NODE");
  CHECK(ErrorField(job, {{"PET_NPROC_PER_NODE", "0"}}) == "PET_NPROC_PER_NODE");
  WorldOverrides zero;
  zero.nproc_per_node = 0;
  CHECK(ErrorField(job, {}, zero) == "--nproc-per-node");
  job.hyperparameters.framework["sagemaker_mpi_num_of_processes_per_host"] = "many";
  CHECK(ErrorField(job, {}) == "sagemaker_mpi_num_of_processes_per_host");
  job.hyperparameters.framework["sagemaker_mpi_num_of_processes_per_host"] = 0;
  CHECK(ErrorField(job, {}) == "sagemaker_mpi_num_of_processes_per_host");
}

TEST_CASE("world: inside torchrun", "[world]") {
  const EnvMap env = {{"LOCAL_RANK", "1"},       {"RANK", "5"},
                      {"WORLD_SIZE", "8"},       {"GROUP_RANK", "1"},
                      {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.1.1.1"},
                      {"MASTER_PORT", "2900"},   {"TORCHELASTIC_RUN_ID", "r7"}};
  // torchrun's variables win over resourceconfig and a GPU count.
  const auto w = ResolveWorld(Job({"algo-1", "algo-2"}, "algo-1", 8), env, {});
  CHECK(w.launcher == Launcher::kTorchrun);
  CHECK(w.node_rank == 1);
  CHECK(w.nnodes == 2);
  CHECK(w.nproc_per_node == 4);
  CHECK(w.launched_local_rank == std::optional<int>(1));
  CHECK(w.master_addr == "10.1.1.1");
  CHECK(w.master_port == 2900);
  CHECK(w.run_id == "r7");
  CHECK(w.current_host == "algo-1");
  CHECK(w.restart_count == 0);
  EnvMap local = env;
  local["HOSTNAME"] = "box-3";
  CHECK(ResolveWorld(Job(), local, {}).current_host == "box-3");
}

TEST_CASE("world: torchrun's attempt and restart budget reach the child unchanged", "[world]") {
  // An elastic restart's attempt number is what makes the trainer use that attempt's keys
  // in the agent store; a child told 0 would wait for attempt 0's peers forever.
  const EnvMap env = {{"LOCAL_RANK", "0"},
                      {"RANK", "1"},
                      {"WORLD_SIZE", "2"},
                      {"GROUP_RANK", "1"},
                      {"LOCAL_WORLD_SIZE", "1"},
                      {"TORCHELASTIC_RESTART_COUNT", "2"},
                      {"TORCHELASTIC_MAX_RESTARTS", "3"}};
  const auto w = ResolveWorld(Job(), env, {});
  CHECK(w.restart_count == 2);
  CHECK(w.max_restarts == 3);
  const auto vars = ProcessVariables(w, 0);
  CHECK(vars.at("TORCHELASTIC_RESTART_COUNT") == "2");
  CHECK(vars.at("TORCHELASTIC_MAX_RESTARTS") == "3");
  EnvMap bad = env;
  bad["TORCHELASTIC_RESTART_COUNT"] = "-1";
  CHECK(ErrorField(Job(), bad) == "TORCHELASTIC_RESTART_COUNT");
  bad = env;
  bad["TORCHELASTIC_MAX_RESTARTS"] = "x";
  CHECK(ErrorField(Job(), bad) == "TORCHELASTIC_MAX_RESTARTS");
}

TEST_CASE("world: bad torchrun variables name the variable", "[world]") {
  const EnvMap good = {{"LOCAL_RANK", "1"},
                       {"RANK", "5"},
                       {"WORLD_SIZE", "8"},
                       {"GROUP_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "4"}};
  const auto job = Job();
  auto with = [&](const std::string& key, const std::string& value) {
    EnvMap env = good;
    env[key] = value;
    return env;
  };
  CHECK(ErrorField(job, good).empty());
  CHECK(ErrorField(job, with("RANK", "x")) == "RANK");
  CHECK(ErrorField(job, with("RANK", "6")) ==
        "RANK");  // != GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK
  CHECK(ErrorField(job, with("LOCAL_RANK", "4")) == "LOCAL_RANK");
  CHECK(ErrorField(job, with("GROUP_RANK", "2")) == "GROUP_RANK");
  CHECK(ErrorField(job, with("WORLD_SIZE", "6")) == "WORLD_SIZE");
  CHECK(ErrorField(job, with("WORLD_SIZE", "0")) == "WORLD_SIZE");
  CHECK(ErrorField(job, with("LOCAL_WORLD_SIZE", "1.5")) == "LOCAL_WORLD_SIZE");
  CHECK(ErrorField(job, with("GROUP_WORLD_SIZE", "3")) == "GROUP_WORLD_SIZE");
  EnvMap missing = good;
  missing.erase("LOCAL_WORLD_SIZE");
  CHECK(ErrorField(job, missing) == "LOCAL_WORLD_SIZE");
  WorldOverrides o;
  o.nproc_per_node = 2;
  CHECK(ErrorField(job, good, o) == "LOCAL_WORLD_SIZE");
}

TEST_CASE("world: Kubeflow PyTorchJob with PET_ variables", "[world]") {
  const EnvMap env = {{"PET_NNODES", "3"},
                      {"PET_NODE_RANK", "2"},
                      {"PET_NPROC_PER_NODE", "4"},
                      {"MASTER_ADDR", "job-master-0"},
                      {"MASTER_PORT", "23456"},
                      {"WORLD_SIZE", "12"},
                      {"RANK", "2"}};
  const auto w = ResolveWorld(Job({"algo-1"}, "algo-1", 8), env, {});
  CHECK(w.launcher == Launcher::kKubeflow);
  CHECK(w.node_rank == 2);
  CHECK(w.nnodes == 3);
  CHECK(w.nproc_per_node == 4);
  CHECK(w.master_addr == "job-master-0");
  CHECK(w.master_port == 23456);
  CHECK_FALSE(w.launched_local_rank.has_value());
}

TEST_CASE("world: Kubeflow without PET_NNODES: RANK is the node index", "[world]") {
  SECTION("numeric PET_NPROC_PER_NODE: WORLD_SIZE counts processes") {
    const EnvMap env = {
        {"MASTER_ADDR", "m"}, {"WORLD_SIZE", "8"}, {"RANK", "1"}, {"PET_NPROC_PER_NODE", "4"}};
    const auto w = ResolveWorld(Job(), env, {});
    CHECK(w.launcher == Launcher::kKubeflow);
    CHECK(w.nnodes == 2);
    CHECK(w.node_rank == 1);
    CHECK(w.nproc_per_node == 4);
  }
  SECTION("classic operator: WORLD_SIZE counts pods") {
    const EnvMap env = {
        {"MASTER_ADDR", "m"}, {"WORLD_SIZE", "3"}, {"RANK", "2"}, {"MASTER_PORT", "23456"}};
    const auto w = ResolveWorld(Job({}, "", 2), env, {});
    CHECK(w.launcher == Launcher::kKubeflow);
    CHECK(w.nnodes == 3);
    CHECK(w.node_rank == 2);
    CHECK(w.nproc_per_node == 2);  // from the GPU count
    CHECK(w.master_addr == "m");
  }
}

TEST_CASE("world: bad Kubeflow variables", "[world]") {
  const auto job = Job();
  CHECK(ErrorField(job, {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "2"}, {"MASTER_ADDR", "m"}}) ==
        "PET_NODE_RANK");
  CHECK(ErrorField(job, {{"PET_NNODES", "two"}, {"PET_NODE_RANK", "0"}}) == "PET_NNODES");
  CHECK(ErrorField(job, {{"PET_NNODES", "1:4"}, {"PET_NODE_RANK", "0"}}) == "PET_NNODES");
  CHECK(ErrorField(job, {{"PET_NNODES", "2:2"}, {"PET_NODE_RANK", "1"}, {"MASTER_ADDR", "m"}})
            .empty());
  CHECK(ErrorField(job, {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}}) == "MASTER_ADDR");
  CHECK(ErrorField(job, {{"PET_NNODES", "2"}, {"MASTER_ADDR", "m"}}) == "RANK");
  CHECK(ErrorField(job, {{"MASTER_ADDR", "m"},
                         {"WORLD_SIZE", "6"},
                         {"RANK", "0"},
                         {"PET_NPROC_PER_NODE", "4"}}) == "WORLD_SIZE");
  CHECK(ErrorField(job, {{"MASTER_ADDR", "m"}, {"WORLD_SIZE", "0"}, {"RANK", "0"}}) ==
        "WORLD_SIZE");
  CHECK(ErrorField(job, {{"MASTER_ADDR", "m"}, {"WORLD_SIZE", "2"}, {"RANK", "-1"}}) == "RANK");
}

TEST_CASE("world: Open MPI with one supervisor per node", "[world]") {
  const EnvMap env = {{"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                      {"MASTER_ADDR", "10.0.0.1"}};
  const auto w = ResolveWorld(Job({}, "", 4), env, {});
  CHECK(w.launcher == Launcher::kOpenMpi);
  CHECK(w.node_rank == 1);
  CHECK(w.nnodes == 2);
  CHECK(w.nproc_per_node == 4);
  CHECK(w.master_addr == "10.0.0.1");
  CHECK_FALSE(w.launched_local_rank.has_value());
}

TEST_CASE("world: Open MPI with one process per slot, master from resourceconfig", "[world]") {
  const EnvMap env = {{"OMPI_COMM_WORLD_RANK", "6"},
                      {"OMPI_COMM_WORLD_SIZE", "8"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  const auto w = ResolveWorld(Job({"algo-1", "algo-2"}, "algo-2", 8), env, {});
  CHECK(w.launcher == Launcher::kOpenMpi);
  CHECK(w.node_rank == 1);
  CHECK(w.nnodes == 2);
  CHECK(w.nproc_per_node == 4);
  CHECK(w.launched_local_rank == std::optional<int>(2));
  CHECK(w.master_addr == "algo-1");
  CHECK(w.current_host == "algo-2");
}

TEST_CASE("world: bad Open MPI variables", "[world]") {
  const EnvMap good = {{"OMPI_COMM_WORLD_RANK", "6"},
                       {"OMPI_COMM_WORLD_SIZE", "8"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                       {"MASTER_ADDR", "m"}};
  auto with = [&](const std::string& key, const std::string& value) {
    EnvMap env = good;
    env[key] = value;
    return env;
  };
  const auto job = Job();
  CHECK(ErrorField(job, good).empty());
  CHECK(ErrorField(job, with("OMPI_COMM_WORLD_RANK", "8")) == "OMPI_COMM_WORLD_RANK");
  CHECK(ErrorField(job, with("OMPI_COMM_WORLD_RANK", "")) == "OMPI_COMM_WORLD_RANK");
  CHECK(ErrorField(job, with("OMPI_COMM_WORLD_SIZE", "7")) == "OMPI_COMM_WORLD_SIZE");
  CHECK(ErrorField(job, with("OMPI_COMM_WORLD_LOCAL_RANK", "1")) == "OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK(ErrorField(job, with("OMPI_COMM_WORLD_LOCAL_SIZE", "0")) == "OMPI_COMM_WORLD_LOCAL_SIZE");
  EnvMap no_master = good;
  no_master.erase("MASTER_ADDR");
  CHECK(ErrorField(job, no_master) == "MASTER_ADDR");
  EnvMap no_local = good;
  no_local.erase("OMPI_COMM_WORLD_LOCAL_SIZE");
  CHECK(ErrorField(job, no_local) == "OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST_CASE("world: Slurm with one task per node", "[world]") {
  const EnvMap env = {{"SLURM_NODEID", "2"},        {"SLURM_NNODES", "3"},
                      {"SLURM_NTASKS", "3"},        {"SLURM_PROCID", "2"},
                      {"SLURM_LOCALID", "0"},       {"SLURM_JOB_NODELIST", "gpu-[07-09]"},
                      {"SLURMD_NODENAME", "gpu-09"}};
  const auto w = ResolveWorld(Job({"algo-1"}, "algo-1", 8), env, {});
  CHECK(w.launcher == Launcher::kSlurm);
  CHECK(w.node_rank == 2);
  CHECK(w.nnodes == 3);
  CHECK(w.nproc_per_node == 8);
  CHECK(w.hosts == std::vector<std::string>{"gpu-07", "gpu-08", "gpu-09"});
  CHECK(w.master_addr == "gpu-07");
  CHECK(w.current_host == "gpu-09");
  CHECK_FALSE(w.launched_local_rank.has_value());
}

TEST_CASE("world: Slurm with a task per GPU and SLURM_JOB_NUM_NODES", "[world]") {
  const EnvMap env = {{"SLURM_NODEID", "1"},   {"SLURM_JOB_NUM_NODES", "2"},
                      {"SLURM_NTASKS", "8"},   {"SLURM_PROCID", "5"},
                      {"SLURM_LOCALID", "1"},  {"SLURM_JOB_NODELIST", "n[1-2]"},
                      {"MASTER_ADDR", "n1-ib"}};
  const auto w = ResolveWorld(Job(), env, {});
  CHECK(w.nnodes == 2);
  CHECK(w.node_rank == 1);
  CHECK(w.nproc_per_node == 4);
  CHECK(w.launched_local_rank == std::optional<int>(1));
  CHECK(w.master_addr == "n1-ib");  // an exported MASTER_ADDR beats the first host
  CHECK(w.current_host == "n2");
}

TEST_CASE("world: bad Slurm variables", "[world]") {
  const EnvMap good = {{"SLURM_NODEID", "1"},  {"SLURM_NNODES", "2"},
                       {"SLURM_NTASKS", "8"},  {"SLURM_PROCID", "5"},
                       {"SLURM_LOCALID", "1"}, {"SLURM_JOB_NODELIST", "n[1-2]"}};
  auto with = [&](const std::string& key, const std::string& value) {
    EnvMap env = good;
    env[key] = value;
    return env;
  };
  const auto job = Job();
  CHECK(ErrorField(job, good).empty());
  CHECK(ErrorField(job, with("SLURM_NODEID", "2")) == "SLURM_NODEID");
  CHECK(ErrorField(job, with("SLURM_NNODES", "x")) == "SLURM_NNODES");
  CHECK(ErrorField(job, with("SLURM_NTASKS", "7")) == "SLURM_NTASKS");
  CHECK(ErrorField(job, with("SLURM_PROCID", "2")) == "SLURM_PROCID");  // cyclic distribution
  CHECK(ErrorField(job, with("SLURM_LOCALID", "4")) == "SLURM_LOCALID");
  CHECK(ErrorField(job, with("SLURM_JOB_NODELIST", "n[1-2")) == "SLURM_JOB_NODELIST");
  CHECK(ErrorField(job, with("SLURM_JOB_NODELIST", "n1")) ==
        "SLURM_JOB_NODELIST");  // fewer hosts than nodes
  EnvMap no_count = good;
  no_count.erase("SLURM_NNODES");
  CHECK(ErrorField(job, no_count) == "SLURM_JOB_NUM_NODES");
  EnvMap no_list = good;
  no_list.erase("SLURM_JOB_NODELIST");
  CHECK(ErrorField(job, no_list) == "SLURM_JOB_NODELIST");
}

TEST_CASE("world: launcher precedence", "[world]") {
  const EnvMap torchrun = {{"LOCAL_RANK", "0"},
                           {"RANK", "0"},
                           {"WORLD_SIZE", "1"},
                           {"GROUP_RANK", "0"},
                           {"LOCAL_WORLD_SIZE", "1"}};
  const EnvMap kubeflow = {{"PET_NNODES", "1"}, {"PET_NODE_RANK", "0"}};
  const EnvMap mpi = {{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}};
  const EnvMap slurm = {{"SLURM_NODEID", "0"}, {"SLURM_NNODES", "1"}, {"SLURM_JOB_NODELIST", "n1"}};
  auto merged = [](std::initializer_list<const EnvMap*> maps) {
    EnvMap env;
    for (const auto* m : maps)
      env.insert(m->begin(), m->end());
    return env;
  };
  const auto sm = Job({"algo-1"}, "algo-1");
  CHECK(ResolveWorld(sm, merged({&torchrun, &kubeflow, &mpi, &slurm}), {}).launcher ==
        Launcher::kTorchrun);
  CHECK(ResolveWorld(sm, merged({&kubeflow, &mpi, &slurm}), {}).launcher == Launcher::kKubeflow);
  CHECK(ResolveWorld(sm, merged({&mpi, &slurm}), {}).launcher == Launcher::kOpenMpi);
  CHECK(ResolveWorld(sm, merged({&slurm}), {}).launcher == Launcher::kSlurm);
  CHECK(ResolveWorld(sm, {}, {}).launcher == Launcher::kSageMaker);
  CHECK(ResolveWorld(Job(), {}, {}).launcher == Launcher::kSingle);
  // A partial torchrun set (no GROUP_RANK) is not torchrun; with MASTER_ADDR it reads as Kubeflow.
  CHECK(ResolveWorld(sm, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "m"}}, {}).launcher ==
        Launcher::kKubeflow);
}

TEST_CASE("world: per-process torchrun variables", "[world]") {
  World w;
  w.node_rank = 1;
  w.nnodes = 2;
  w.nproc_per_node = 4;
  w.master_addr = "algo-1";
  w.master_port = 29501;
  w.run_id = "job-7";
  const auto vars = ProcessVariables(w, 3);
  const EnvMap expected = {{"RANK", "7"},
                           {"LOCAL_RANK", "3"},
                           {"WORLD_SIZE", "8"},
                           {"LOCAL_WORLD_SIZE", "4"},
                           {"GROUP_RANK", "1"},
                           {"GROUP_WORLD_SIZE", "2"},
                           {"ROLE_NAME", "default"},
                           {"ROLE_RANK", "7"},
                           {"ROLE_WORLD_SIZE", "8"},
                           {"MASTER_ADDR", "algo-1"},
                           {"MASTER_PORT", "29501"},
                           {"TORCHELASTIC_RUN_ID", "job-7"},
                           {"TORCHELASTIC_RESTART_COUNT", "0"},
                           {"TORCHELASTIC_MAX_RESTARTS", "0"}};
  CHECK(vars == expected);
  CHECK_THROWS_AS(ProcessVariables(w, 4), std::out_of_range);
  CHECK_THROWS_AS(ProcessVariables(w, -1), std::out_of_range);
}

TEST_CASE("world: a child's own variables resolve to the same world", "[world]") {
  // What the supervisor gives its children must read back as the same world
  // when a child (e.g. the trainer) resolves it again.
  const auto parent = ResolveWorld(Job({"algo-1", "algo-2", "algo-3"}, "algo-3", 2), {}, {});
  for (int local = 0; local < parent.nproc_per_node; ++local) {
    const auto child = ResolveWorld(Job({"algo-1", "algo-2", "algo-3"}, "algo-3", 2),
                                    ProcessVariables(parent, local), {});
    CHECK(child.launcher == Launcher::kTorchrun);
    CHECK(child.node_rank == parent.node_rank);
    CHECK(child.nnodes == parent.nnodes);
    CHECK(child.nproc_per_node == parent.nproc_per_node);
    CHECK(child.master_addr == parent.master_addr);
    CHECK(child.master_port == parent.master_port);
    CHECK(child.launched_local_rank == std::optional<int>(local));
  }
}

TEST_CASE("world: run id falls back to the training job name", "[world]") {
  auto job = Job();
  job.job_name = "my-job";
  CHECK(ResolveWorld(job, {}, {}).run_id == "my-job");
  CHECK(ResolveWorld(Job(), {}, {}).run_id == "none");
}
