#pragma once
// One GET and its streamed answer on a connection of its own (Boost.Beast, OpenSSL), for files
// too large to hold in memory. Every step is bounded: resolving and connecting, the proxy's
// CONNECT and the TLS handshake by the connect timeout; writing the request and each read by
// the idle timeout, so a server that accepts and then sends nothing is a stall, not a hang.
// Through a proxy, http URLs are asked for in absolute form and https URLs go through a
// CONNECT tunnel (TLS end to end, the proxy sees only the host and port); a proxy URL's
// user:password is sent as Proxy-Authorization: Basic. TLS verifies the server as
// tracking/tls_client.h says.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "download/url.h"
#include "tracking/aws_sigv4.h"

namespace mrcnn::download {

struct ConnectionTimeouts {
  std::chrono::milliseconds connect{10'000};
  std::chrono::milliseconds idle{20'000};
};

// The status line and the headers the downloader acts on.
struct AnswerHead {
  unsigned status = 0;
  std::string reason;
  std::optional<uint64_t> content_length;
  std::string content_range;
  std::string location;
  std::string etag;
};

class HttpConnection {
 public:
  // Connects to `url`'s host (or to `proxy`). Throws DownloadError naming the host.
  HttpConnection(const Url& url, const std::optional<Url>& proxy, ConnectionTimeouts timeouts);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends GET for the URL with `headers` (Host, User-Agent, Accept-Encoding: identity and
  // Connection: close are set here) and reads the answer's head. Throws DownloadError.
  AnswerHead Get(const tracking::HeaderList& headers);

  // Up to `size` bytes of the body into `buffer`; 0 once the body is complete. Throws
  // DownloadError (retryable) for a stall or a connection that ends before the body does.
  size_t ReadBody(char* buffer, size_t size);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mrcnn::download
