#pragma once
// Rendezvous of a data-parallel job through c10d::TCPStore (libtorch_cpu): rank 0 serves
// the store at MASTER_ADDR:MASTER_PORT and waits until all WORLD_SIZE ranks have
// connected; the others connect, retrying until `timeout`. Under a launcher that serves
// the store itself (torchrun's agent, `agent_store_prefix` set) every rank connects as a
// client and its keys live under that prefix; nobody waits for the others there, the
// first Get does. Failures become
// std::runtime_error naming MASTER_ADDR/MASTER_PORT and what to check. The header is
// Torch-free (the store is used through kv_store.h).
#include <chrono>
#include <memory>
#include <string>

#include "trainer/engine/distributed/kv_store.h"

namespace mrcnn::engine::dist {

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  // Non-empty: connect to the launcher's store at MASTER_ADDR:MASTER_PORT (no rank listens)
  // and prefix every key with it, as torch's workers do ("/worker/attempt_<restart>").
  std::string agent_store_prefix;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

std::unique_ptr<KeyValueStore> Rendezvous(const RendezvousOptions& options);

}  // namespace mrcnn::engine::dist
