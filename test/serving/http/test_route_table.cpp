// The route table: patterns with {name} segments, 404 and 405 (+ Allow) from the table alone,
// and the SageMaker routes' room for multi-model routes next to /invocations.
#include <boost/beast/http/fields.hpp>
#include <catch2/catch.hpp>
#include <stdexcept>

#include "serving/http/http_error.h"
#include "serving/http/route_table.h"

using namespace mrcnn::serving;
namespace http = boost::beast::http;

namespace {

// A handler that says which route answered.
RouteHandler Named(std::string name) {
  return [name](const RequestHead&) {
    Exchange exchange;
    exchange.headers = {{"X-Route", name}};
    return exchange;
  };
}

std::string RouteName(const RouteTable& table, http::verb method, std::string_view path,
                      std::map<std::string, std::string>* params = nullptr) {
  RouteTable::Match match = table.Resolve(method, path);
  const http::request_header<> fields;
  const RequestHead head{method, std::string(path), match.params, fields, {}};
  if (params != nullptr) {
    *params = match.params;
  }
  return (*match.handler)(head).headers.at(0).second;
}

HttpError ErrorOf(const RouteTable& table, http::verb method, std::string_view path) {
  try {
    table.Resolve(method, path);
  } catch (const HttpError& e) {
    return e;
  }
  FAIL("no error for " << path);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("routes resolve by method and path pattern", "[serving][routes]") {
  RouteTable table;
  table.Add(http::verb::get, "/ping", Named("ping"));
  table.Add(http::verb::post, "/invocations", Named("invocations"));
  table.Add(http::verb::get, "/models", Named("list"));
  table.Add(http::verb::post, "/models", Named("load"));
  table.Add(http::verb::get, "/models/{name}", Named("describe"));
  table.Add(http::verb::delete_, "/models/{name}", Named("unload"));
  table.Add(http::verb::post, "/models/{name}/invoke", Named("invoke"));

  CHECK(RouteName(table, http::verb::get, "/ping") == "ping");
  CHECK(RouteName(table, http::verb::post, "/invocations") == "invocations");
  CHECK(RouteName(table, http::verb::get, "/models") == "list");
  CHECK(RouteName(table, http::verb::post, "/models") == "load");
  std::map<std::string, std::string> params;
  CHECK(RouteName(table, http::verb::delete_, "/models/resnet-2", &params) == "unload");
  CHECK(params == std::map<std::string, std::string>{{"name", "resnet-2"}});
  CHECK(RouteName(table, http::verb::post, "/models/m%201/invoke", &params) == "invoke");
  CHECK(params.at("name") == "m%201");  // raw: decoding is the route's business

  // No pattern matches the path: 404, and the detail lists the routes.
  for (const char* path : {"/nowhere", "/", "", "/ping/", "/models//invoke", "/models/a/b",
                           "/invocations/x", "ping"}) {
    INFO(path);
    const HttpError error = ErrorOf(table, http::verb::get, path);
    CHECK(error.status() == 404);
    CHECK(error.code() == "not_found");
    CHECK_THAT(error.detail(),
               Catch::Contains("GET /ping") && Catch::Contains("POST /models/{name}/invoke"));
  }
  // The path matches, the method does not: 405 with every method the path takes.
  const HttpError wrong_method = ErrorOf(table, http::verb::put, "/models/x");
  CHECK(wrong_method.status() == 405);
  CHECK(wrong_method.code() == "method_not_allowed");
  CHECK(wrong_method.headers() == HttpHeaders{{"Allow", "GET, DELETE"}});
  CHECK(ErrorOf(table, http::verb::get, "/invocations").headers() ==
        HttpHeaders{{"Allow", "POST"}});
}

TEST_CASE("the first matching route wins, bad patterns are refused", "[serving][routes]") {
  RouteTable table;
  table.Add(http::verb::get, "/models/default", Named("literal"));
  table.Add(http::verb::get, "/models/{name}", Named("parameter"));
  CHECK(RouteName(table, http::verb::get, "/models/default") == "literal");
  CHECK(RouteName(table, http::verb::get, "/models/other") == "parameter");
  CHECK(table.Describe() == "GET /models/default and GET /models/{name}");

  CHECK_THROWS_AS(table.Add(http::verb::get, "models", Named("x")), std::invalid_argument);
  CHECK_THROWS_AS(table.Add(http::verb::get, "/models/{}", Named("x")), std::invalid_argument);
  CHECK_THROWS_AS(table.Add(http::verb::get, "/models/{name", Named("x")), std::invalid_argument);
  CHECK_THROWS_AS(table.Add(http::verb::get, "/a{name}", Named("x")), std::invalid_argument);
}
