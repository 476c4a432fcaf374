#include "trainer/engine/distributed/rendezvous.h"

#include <stdexcept>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace mrcnn::engine::dist {
namespace {

std::string Where(const RendezvousOptions& o) {
  return "MASTER_ADDR=" + o.master_addr + " MASTER_PORT=" + std::to_string(o.master_port);
}

std::string Secs(std::chrono::milliseconds t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count()) + " s";
}

class TcpStore : public KeyValueStore {
 public:
  TcpStore(c10::intrusive_ptr<c10d::TCPStore> store, RendezvousOptions options)
      : store_(std::move(store)), options_(std::move(options)) {}

  void Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      throw std::runtime_error("rendezvous store (" + Where(options_) + "): setting " + key +
                               " failed (rank 0 gone?): " + e.what());
    }
  }

  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({key}, timeout);
      const std::vector<uint8_t> v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      throw std::runtime_error("rendezvous store (" + Where(options_) + "): no value for " + key +
                               " within " + Secs(timeout) +
                               " (did every rank start? see their logs): " + e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
  RendezvousOptions options_;
};

}  // namespace

std::unique_ptr<KeyValueStore> Rendezvous(const RendezvousOptions& options) {
  if (options.master_port <= 0 || options.master_port > 65535) {
    throw std::runtime_error("MASTER_PORT must be in 1..65535, got " +
                             std::to_string(options.master_port));
  }
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(options.master_port);
  o.isServer = options.rank == 0;
  o.numWorkers = static_cast<size_t>(options.world_size);
  // Rank 0 returns only when every rank has connected: the rendezvous proper.
  o.waitWorkers = true;
  o.timeout = options.timeout;
  try {
    return std::make_unique<TcpStore>(c10::make_intrusive<c10d::TCPStore>(options.master_addr, o),
                                      options);
  } catch (const std::exception& e) {
    const std::string hint =
        options.rank == 0
            ? "rank 0 serves the store there: is the port free and the address one of this "
              "host's, and did all WORLD_SIZE=" +
                  std::to_string(options.world_size) + " ranks start?"
            : "is rank 0 running and reachable there from this host?";
    throw std::runtime_error("rendezvous failed (rank " + std::to_string(options.rank) + ", " +
                             Where(options) + ", timeout " + Secs(options.timeout) + "): " + hint +
                             " Cause: " + e.what());
  }
}

}  // namespace mrcnn::engine::dist
