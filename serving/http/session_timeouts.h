#pragma once
// Inside http/ only: how long each phase of a connection may take (session.h). Idle
// keep-alive time, header time and body time are limited separately, so a slow client holds
// a socket, never a thread; a body or a response may take its base time plus its size at the
// minimum transfer rate, so large ones are limited by a rate rather than cut off. What a
// route does with the body is limited by the route's own deadline (route.h), not here.
#include <chrono>
#include <cstdint>

#include "serving/http/http_options.h"

namespace mrcnn::serving {

// The time a transfer of `bytes` may take: the base timeout plus the bytes at the minimum
// rate.
std::chrono::milliseconds TransferTime(std::chrono::milliseconds base, uint64_t bytes,
                                       double bytes_per_second);

class SessionTimeouts {
 public:
  // After an early answer, how long unread input is discarded before the socket closes.
  static constexpr std::chrono::seconds kLinger{2};

  explicit SessionTimeouts(const HttpOptions& options) : options_(options) {}

  // Waiting for the first byte of the next request on a keep-alive connection.
  std::chrono::milliseconds Idle() const { return options_.idle_timeout; }
  // From the first byte to the end of the headers.
  std::chrono::milliseconds Header() const { return options_.header_timeout; }
  // A body of `bytes` (its Content-Length, else the payload limit).
  std::chrono::milliseconds Body(uint64_t bytes) const {
    return TransferTime(options_.body_timeout, bytes, options_.min_transfer_bytes_per_s);
  }
  // The interim 100 Continue.
  std::chrono::milliseconds Continue() const { return options_.write_timeout; }
  // A response of `bytes`.
  std::chrono::milliseconds Write(uint64_t bytes) const {
    return TransferTime(options_.write_timeout, bytes, options_.min_transfer_bytes_per_s);
  }

 private:
  const HttpOptions& options_;
};

}  // namespace mrcnn::serving
