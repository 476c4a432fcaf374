#include "download/proxy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include <string>

namespace mrcnn::download {
namespace {

// The first of `names` that is set and not empty, with the name it came from.
std::optional<std::pair<std::string, std::string>> FirstSet(
    const common::EnvMap& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = common::Lookup(env, name); value && !value->empty()) {
      return std::make_pair(std::string(name), *value);
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> Ipv4(std::string_view text) {
  in_addr address{};
  if (inet_pton(AF_INET, std::string(text).c_str(), &address) != 1)
    return std::nullopt;
  return ntohl(address.s_addr);
}

bool InIpv4Block(std::string_view block, std::string_view host) {
  const size_t slash = block.find('/');
  const auto network = Ipv4(block.substr(0, slash));
  const auto address = Ipv4(host);
  unsigned bits = 0;
  const std::string_view length = block.substr(slash + 1);
  const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), bits);
  if (!network || !address || ec != std::errc() || end != length.data() + length.size() ||
      bits > 32) {
    return false;
  }
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (*network & mask) == (*address & mask);
}

// One NO_PROXY entry against a lower-case host.
bool EntryExempts(std::string entry, const std::string& host, uint16_t port) {
  if (entry == "*")
    return true;
  if (entry.find('/') != std::string::npos)
    return InIpv4Block(entry, host);
  if (entry.starts_with('[')) {  // [v6] or [v6]:port
    const size_t close = entry.find(']');
    if (close == std::string::npos)
      return false;
    const std::string rest = entry.substr(close + 1);
    if (!rest.empty() && rest != std::string(":").append(std::to_string(port)))
      return false;
    return entry.substr(1, close - 1) == host;
  }
  if (const size_t colon = entry.rfind(':');
      colon != std::string::npos && entry.find(':') == colon) {  // name:port, not an IPv6
    if (entry.substr(colon + 1) != std::to_string(port))
      return false;
    entry.resize(colon);
  }
  if (entry.starts_with('.'))
    entry.erase(0, 1);
  if (entry.empty())
    return false;
  return host == entry || (host.size() > entry.size() && host.ends_with(entry) &&
                           host[host.size() - entry.size() - 1] == '.');
}

}  // namespace

bool NoProxyExempts(std::string_view list, std::string_view host, uint16_t port) {
  const std::string lower_host = LowerAscii(host);
  const std::string lower = LowerAscii(list);
  size_t start = 0;
  while (start < lower.size()) {
    const size_t end = std::min(lower.find_first_of(", \t", start), lower.size());
    if (end > start && EntryExempts(lower.substr(start, end - start), lower_host, port)) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

std::optional<Url> ProxyFor(const Url& target, const common::EnvMap& env) {
  if (auto no_proxy = FirstSet(env, {"no_proxy", "NO_PROXY"});
      no_proxy && NoProxyExempts(no_proxy->second, target.host, target.port)) {
    return std::nullopt;
  }
  const auto proxy = target.tls ? FirstSet(env, {"https_proxy", "HTTPS_PROXY"})
                                : FirstSet(env, {"http_proxy", "HTTP_PROXY"});
  if (!proxy)
    return std::nullopt;
  const std::string& value = proxy->second;
  if (LowerAscii(value).starts_with("https://")) {
    throw std::invalid_argument(proxy->first + "=" + value +
                                ": a proxy reached over TLS is not supported; give its http:// "
                                "address (https downloads still go through it as a CONNECT "
                                "tunnel)");
  }
  try {
    return ParseUrl(value.find("://") == std::string::npos ? "http://" + value : value);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(proxy->first + ": " + e.what());
  }
}

}  // namespace mrcnn::download
