#include "serving/http/route_table.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace mrcnn::serving {
namespace {

namespace http = boost::beast::http;

// "/a/b" -> {"a", "b"}; "/" -> {""}. Empty segments are kept so that "/a//b" matches nothing.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> segments;
  path.remove_prefix(1);
  while (true) {
    const size_t slash = path.find('/');
    segments.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) {
      return segments;
    }
    path.remove_prefix(slash + 1);
  }
}

bool IsParameter(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

std::string EncodeErrorJson(const std::string& code, const std::string& detail) {
  // Codes and details may carry arbitrary bytes; never let them make dump() throw.
  return nlohmann::json{{"error", code}, {"detail", detail}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

RouteAnswer ErrorAnswer(const HttpError& error) {
  return RouteAnswer{error.status(), EncodeErrorJson(error.code(), error.detail()),
                     "application/json", error.headers()};
}

RouteAnswer ErrorAnswer(unsigned status, const std::string& code, const std::string& detail) {
  return RouteAnswer{status, EncodeErrorJson(code, detail), "application/json", {}};
}

Exchange ImmediateExchange(RouteAnswer answer) {
  Exchange exchange;
  exchange.run = [answer = std::move(answer)](std::vector<uint8_t>, Reply reply) { reply(answer); };
  return exchange;
}

void RouteTable::Add(http::verb method, std::string pattern, RouteHandler handler) {
  if (pattern.empty() || pattern.front() != '/') {
    throw std::invalid_argument(fmt::format("route pattern \"{}\" must start with /", pattern));
  }
  std::vector<std::string> segments;
  for (std::string_view segment : Segments(pattern)) {
    const bool braces = segment.find_first_of("{}") != std::string_view::npos;
    if (braces && !IsParameter(segment)) {
      throw std::invalid_argument(
          fmt::format("route pattern \"{}\": a parameter is a whole segment {{name}}", pattern));
    }
    segments.emplace_back(segment);
  }
  routes_.push_back(Route{method, std::move(pattern), std::move(segments), std::move(handler)});
}

RouteTable::Match RouteTable::Resolve(http::verb method, std::string_view path) const {
  const std::vector<std::string_view> segments =
      path.empty() || path.front() != '/' ? std::vector<std::string_view>{} : Segments(path);
  std::string allow;
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size() || segments.empty()) {
      continue;
    }
    Match match{&route.handler, route.pattern, {}};
    bool matches = true;
    for (size_t i = 0; i < segments.size() && matches; ++i) {
      const std::string& want = route.segments[i];
      if (IsParameter(want)) {
        matches = !segments[i].empty();
        match.params[want.substr(1, want.size() - 2)] = std::string(segments[i]);
      } else {
        matches = want == segments[i];
      }
    }
    if (!matches) {
      continue;
    }
    if (route.method == method) {
      return match;
    }
    const std::string name(http::to_string(route.method));
    if (allow.find(name) == std::string::npos) {
      allow += allow.empty() ? name : ", " + name;
    }
  }
  const std::string shown(path.substr(0, 200));
  if (!allow.empty()) {
    throw HttpError(405, "method_not_allowed",
                    fmt::format("{} {} is not supported; use {} {}",
                                std::string(http::to_string(method)), shown, allow, shown),
                    {{"Allow", allow}});
  }
  throw HttpError(404, "not_found",
                  fmt::format("no route {} {}; the routes are {}",
                              std::string(http::to_string(method)), shown, Describe()));
}

std::string RouteTable::Describe() const {
  std::string out;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (i > 0) {
      out += i + 1 == routes_.size() ? " and " : ", ";
    }
    out +=
        fmt::format("{} {}", std::string(http::to_string(routes_[i].method)), routes_[i].pattern);
  }
  return out;
}

}  // namespace mrcnn::serving
