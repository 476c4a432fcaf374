#pragma once
// What the HTTP side is told (http_server.h has what each limit does): the server's flags
// and environment (server_config.h, which fills this in with HttpOptionsOf) less everything
// about models.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mrcnn::serving {

struct HttpOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;  // 0 = any free port
  int io_threads = 2;
  size_t max_payload_bytes = 6u << 20;
  // A body (or a response) may take body_timeout (write_timeout) plus its size at this rate.
  double min_transfer_bytes_per_s = 1 << 20;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(75)};
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(25)};
  bool access_log = false;
};

}  // namespace mrcnn::serving
