#pragma once
// The key-value store the ranks rendezvous through: rank 0 serves it, every rank publishes
// what the others need (listening addresses, the NCCL unique id) and reads theirs. An
// interface so the ring all-reduce and its tests need neither Torch nor a real server
// (rendezvous.h gives the c10d::TCPStore one). Torch-free.
#include <chrono>
#include <string>

namespace mrcnn::engine::dist {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void Set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists; throws std::runtime_error naming the key after `timeout`.
  virtual std::string Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

}  // namespace mrcnn::engine::dist
