#pragma once
// Which proxy a download goes through, as curl and Python's urllib choose it: https URLs use
// https_proxy / HTTPS_PROXY, http URLs http_proxy / HTTP_PROXY (the lower-case name first);
// NO_PROXY / no_proxy (lower-case first) lists hosts reached directly. A proxy URL without a
// scheme is taken as http://; a https:// proxy is refused (the tunnel is plain HTTP CONNECT).
#include <optional>
#include <string_view>

#include "common/env_map.h"
#include "download/url.h"

namespace mrcnn::download {

// The proxy for `target`, or nullopt for a direct connection. Throws std::invalid_argument
// naming the variable when its value is not a usable proxy URL.
std::optional<Url> ProxyFor(const Url& target, const common::EnvMap& env);

// Whether NO_PROXY's `list` exempts `host`:`port`. Entries are separated by commas or blanks:
// "*" exempts every host; "example.com" and ".example.com" exempt example.com and its
// subdomains; "host:port" only that port; an IPv4 or IPv6 address itself; "10.0.0.0/8" the
// IPv4 addresses in that block. Case does not matter.
bool NoProxyExempts(std::string_view list, std::string_view host, uint16_t port);

}  // namespace mrcnn::download
