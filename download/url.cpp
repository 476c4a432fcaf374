#include "download/url.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace mrcnn::download {
namespace {

[[noreturn]] void Refuse(std::string_view url, const std::string& why) {
  throw std::invalid_argument("\"" + std::string(url) + "\" is not a usable URL: " + why);
}

// "host", "host:port", "[v6]" or "[v6]:port" into url.host and url.port.
void ParseAuthority(std::string_view text, std::string_view authority, Url& url) {
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      Refuse(text, "an IPv6 address without ']'");
    url.host = LowerAscii(authority.substr(1, close - 1));
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':'))
      Refuse(text, "junk after the IPv6 address");
    if (!rest.empty())
      port = rest.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    url.host = LowerAscii(authority.substr(0, colon));
    if (colon != std::string_view::npos)
      port = authority.substr(colon + 1);
  }
  if (url.host.empty())
    Refuse(text, "no host");
  if (port.empty())
    return;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    Refuse(text, "a bad port \"" + std::string(port) + "\"");
  }
  url.port = static_cast<uint16_t>(value);
}

}  // namespace

std::string LowerAscii(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Url::HostHeader() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port == (tls ? 443 : 80) ? name : name + ":" + std::to_string(port);
}

std::string Url::ToString() const {
  return std::string(tls ? "https://" : "http://") + HostHeader() + target;
}

Url ParseUrl(std::string_view text) {
  Url url;
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    Refuse(text, "no scheme (http:// or https://)");
  const std::string scheme = LowerAscii(text.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https")
    Refuse(text, "the scheme is not http or https");
  url.tls = scheme == "https";
  url.port = url.tls ? 443 : 80;
  std::string_view rest = text.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('#'));  // a fragment is never sent
  const size_t path_start = std::min(rest.find_first_of("/?"), rest.size());
  std::string_view authority = rest.substr(0, path_start);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    url.userinfo = std::string(authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  ParseAuthority(text, authority, url);
  const std::string_view target = rest.substr(path_start);
  // append, not "/" + string: GCC 12 at -O3 warns (-Wrestrict) about the latter's insert.
  url.target = target.starts_with('/') ? std::string(target) : std::string("/").append(target);
  return url;
}

Url ResolveRedirect(const Url& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos)
    return ParseUrl(location);
  if (location.starts_with("//")) {
    return ParseUrl(std::string(base.tls ? "https:" : "http:") + std::string(location));
  }
  Url next = base;
  next.userinfo.clear();
  if (location.starts_with('/')) {
    next.target = std::string(location);
  } else {
    const std::string path = base.target.substr(0, base.target.find('?'));
    next.target = path.substr(0, path.rfind('/') + 1) + std::string(location);
  }
  return next;
}

}  // namespace mrcnn::download
