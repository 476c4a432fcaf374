#include "trainer/engine/distributed/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "trainer/engine/distributed/rendezvous_c10d.h"

namespace mrcnn::engine::dist {
namespace {

std::string Where(const RendezvousOptions& o) {
  std::string where =
      "MASTER_ADDR=" + o.master_addr + " MASTER_PORT=" + std::to_string(o.master_port);
  if (!o.agent_store_prefix.empty())
    where += " (torchrun's agent store, keys under " + o.agent_store_prefix + ")";
  return where;
}

std::string Secs(std::chrono::milliseconds t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count()) + " s";
}

class TcpStore : public KeyValueStore {
 public:
  TcpStore(c10::intrusive_ptr<c10d::Store> store, RendezvousOptions options)
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

  const c10::intrusive_ptr<c10d::Store>& c10d_store() const { return store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  RendezvousOptions options_;
};

// c10d's store server listens on every interface. Rank 0 binds the socket itself to the
// address MASTER_ADDR resolves to, so a job on loopback (tests, one host) exposes nothing
// and a multi-host job listens only where its peers connect. Where that address is not
// one of this host's (a service address in front of the pod, for instance) the bind
// fails with EADDRNOTAVAIL and the store falls back to c10d's own socket on every
// interface, said in the log. Returns -1 for that fallback.
int ListenOnMasterAddress(const RendezvousOptions& o) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(o.master_port);
  if (const int rc = getaddrinfo(o.master_addr.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error("rendezvous: cannot resolve MASTER_ADDR=" + o.master_addr + ": " +
                             gai_strerror(rc));
  }
  std::string last_error;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      freeaddrinfo(found);
      return fd;
    }
    const int err = errno;
    close(fd);
    if (err == EADDRNOTAVAIL) {
      continue;
    }
    freeaddrinfo(found);
    throw std::runtime_error("rendezvous (rank 0): cannot listen on " + Where(o) + ": " +
                             std::strerror(err) + " (is MASTER_PORT already in use?)");
  }
  freeaddrinfo(found);
  std::cerr << "[dist] MASTER_ADDR=" << o.master_addr
            << " is not an address of this host; the rendezvous store listens on every "
               "interface at port "
            << o.master_port << (last_error.empty() ? "" : " (" + last_error + ")") << "\n";
  return -1;
}

// torchrun's agent serves the store; a worker that listened there would find the port
// taken. Connect as torch's own workers do (torch.distributed.rendezvous).
std::unique_ptr<KeyValueStore> ConnectToAgentStore(const RendezvousOptions& options) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(options.master_port);
  o.isServer = false;
  o.numWorkers = static_cast<size_t>(options.world_size);
  o.waitWorkers = false;
  o.timeout = options.timeout;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(options.master_addr, o);
    return std::make_unique<TcpStore>(
        c10::make_intrusive<c10d::PrefixStore>(options.agent_store_prefix, std::move(tcp)),
        options);
  } catch (const std::exception& e) {
    throw std::runtime_error("rendezvous failed (rank " + std::to_string(options.rank) + ", " +
                             Where(options) + ", timeout " + Secs(options.timeout) +
                             "): is the torchrun agent that started this process still running "
                             "and reachable there? Cause: " +
                             e.what());
  }
}

}  // namespace

std::unique_ptr<KeyValueStore> Rendezvous(const RendezvousOptions& options) {
  if (options.master_port <= 0 || options.master_port > 65535) {
    throw std::runtime_error("MASTER_PORT must be in 1..65535, got " +
                             std::to_string(options.master_port));
  }
  if (!options.agent_store_prefix.empty())
    return ConnectToAgentStore(options);
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(options.master_port);
  o.isServer = options.rank == 0;
  o.numWorkers = static_cast<size_t>(options.world_size);
  // Rank 0 returns only when every rank has connected: the rendezvous proper.
  o.waitWorkers = true;
  o.timeout = options.timeout;
  int listen_fd = -1;
  if (o.isServer) {
    listen_fd = ListenOnMasterAddress(options);
    if (listen_fd >= 0) {
      o.masterListenFd = listen_fd;
      // The legacy server takes over a bound socket in every torch release we pin; the
      // libuv one is only needed for thousands of ranks.
      o.useLibUV = false;
    }
  }
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

c10::intrusive_ptr<c10d::Store> C10dStoreOf(KeyValueStore& store) {
  if (auto* tcp = dynamic_cast<TcpStore*>(&store))
    return tcp->c10d_store();
  throw std::invalid_argument("C10dStoreOf: the store did not come from Rendezvous");
}

}  // namespace mrcnn::engine::dist
