#pragma once
// The process's place in a data-parallel job, from the torchrun variables the entrypoint
// sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and torchrun's own
// TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT); a single process when they
// are absent. Torch-free.
#include <cstdint>
#include <string>

#include "common/env_map.h"

namespace mrcnn::engine {

struct ProcessWorld {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // This process's host as the job names it (SM_CURRENT_HOST, which the entrypoint sets),
  // else the system's host name: peers name it when this process dies or stalls.
  std::string host;
  // Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent already serves a TCPStore
  // on MASTER_ADDR:MASTER_PORT: every rank connects to it as a client, under the key prefix
  // torch's own workers use, "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>" (each restart
  // gets fresh keys). Empty when rank 0 serves the store itself.
  std::string agent_store_prefix;
  // Throws common::ConfigError naming the variable when one is malformed.
  static ProcessWorld FromEnv(const common::EnvMap& env);
};

}  // namespace mrcnn::engine
