#pragma once
// Method + path pattern -> handler. A pattern is a path whose segments are literals or
// {name} (one non-empty segment, captured raw into RequestHead::params), e.g.
// "/models/{name}/invoke". The first route added that matches both wins.
#include <boost/beast/http/verb.hpp>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "serving/http/route.h"

namespace mrcnn::serving {

class RouteTable {
 public:
  // Throws std::invalid_argument for a pattern that does not start with '/' or has an
  // empty or unclosed {}.
  void Add(boost::beast::http::verb method, std::string pattern, RouteHandler handler);

  struct Match {
    const RouteHandler* handler = nullptr;
    std::string_view pattern;  // the matching route's pattern, owned by the table
    std::map<std::string, std::string> params;
  };
  // Throws HttpError 404 not_found when no pattern matches the path (the detail lists the
  // routes), 405 method_not_allowed with an Allow header when patterns match the path but
  // none with this method.
  Match Resolve(boost::beast::http::verb method, std::string_view path) const;

  // "GET /ping, GET /execution-parameters and POST /invocations" (for messages).
  std::string Describe() const;

 private:
  struct Route {
    boost::beast::http::verb method;
    std::string pattern;
    std::vector<std::string> segments;
    RouteHandler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace mrcnn::serving
