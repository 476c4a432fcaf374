#pragma once
// One HTTP/1.1 request and its answer, over plain TCP or TLS (Boost.Beast, OpenSSL): what the
// MLflow client needs of HTTP. TLS verifies the server's certificate against the system's
// trust store and its host name; SNI is sent. A fresh connection per request: tracking sends
// a few requests a minute, so keep-alive would buy nothing and cost reconnect logic.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tracking/aws_sigv4.h"

namespace mrcnn::tracking {

struct HttpEndpoint {
  bool tls = false;
  std::string host;  // name or address, no brackets
  uint16_t port = 80;
  std::string base_path;  // "" or "/prefix" (no trailing slash), put before every target

  // "host" or "host:port" as the Host header and SigV4 want it (the port only when not the
  // scheme's default).
  std::string HostHeader() const;
  std::string Describe() const;  // "https://host:port/prefix"
};

struct HttpAnswer {
  unsigned status = 0;
  std::string body;
};

// Sends `method target` (target: path and query, base_path is prepended) with `headers` (Host,
// Content-Length and User-Agent are set here) and `body`. Throws std::runtime_error naming the
// endpoint for resolution, connection, TLS and timeout failures; any HTTP status is an answer.
HttpAnswer ExchangeHttp(const HttpEndpoint& endpoint, std::string_view method,
                        const std::string& target, const HeaderList& headers, std::string_view body,
                        std::chrono::milliseconds timeout);

}  // namespace mrcnn::tracking
