#pragma once
// Ranks of a data-parallel world in threads of one test process, talking over loopback: each
// gets its own DataParallel (rendezvous on a port that was free a moment ago, 30 s timeouts).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "trainer/engine/distributed/data_parallel.h"

inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs body(dp, rank) on `world` ranks at once; configure(options, rank) may change a rank's
// options first. Rethrows the first rank's error after all have finished.
inline void RunRanksInThreads(
    int world, const std::function<void(mrcnn::engine::dist::DataParallel&, int)>& body,
    const std::function<void(mrcnn::engine::dist::DataParallelOptions&, int)>& configure = {}) {
  const int port = FreePort();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        mrcnn::engine::dist::DataParallelOptions o;
        o.rank = r;
        o.world_size = world;
        o.master_port = port;
        o.listen_address = "127.0.0.1";
        o.timeout = std::chrono::seconds(30);
        if (configure)
          configure(o, r);
        mrcnn::engine::dist::DataParallel dp(o, torch::Device(torch::kCPU));
        body(dp, r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors)
    if (e)
      std::rethrow_exception(e);
}
