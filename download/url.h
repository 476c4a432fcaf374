#pragma once
// http(s) URLs as the downloader needs them: where to connect and what to ask for. Host names
// are kept as written (IPv6 literals without their brackets); the target is sent as it is, so
// a presigned URL's query survives byte for byte.
#include <cstdint>
#include <string>
#include <string_view>

namespace mrcnn::download {

struct Url {
  bool tls = false;          // https
  std::string host;          // lower-case name or address, no brackets
  uint16_t port = 80;        // the scheme's default when the URL has none
  std::string target = "/";  // path and query, starting with '/'
  std::string userinfo;      // "user:password" before '@' (proxies), else ""

  // "host" or "host:port" (the port only when not the scheme's default), brackets for IPv6.
  std::string HostHeader() const;
  // scheme://host[:port]target, without the userinfo (what messages show).
  std::string ToString() const;
};

// `text` with A-Z turned into a-z (host names, schemes and NO_PROXY entries compare so).
std::string LowerAscii(std::string_view text);

// Parses an http:// or https:// URL. Throws std::invalid_argument naming the URL for any other
// scheme, an empty host, a bad port or a fragment-only mess.
Url ParseUrl(std::string_view text);

// Where a redirect's Location leads from `base`: an absolute URL, a scheme-relative one
// ("//host/path"), an absolute path or a path relative to base's directory.
Url ResolveRedirect(const Url& base, std::string_view location);

}  // namespace mrcnn::download
