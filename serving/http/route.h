#pragma once
// The contract between the HTTP session (http_server.h: connections, limits, keep-alive,
// writing) and what a route does. A route is a handler that the session calls once a
// request's headers are in, before its body is read:
//
//   handler(head) -> Exchange   on the I/O thread; throws HttpError to refuse the request
//                               from its headers alone (with Expect: 100-continue the
//                               client then never sends the body; otherwise the body is
//                               read and dropped so the connection stays usable)
//   exchange.run(body, reply)   on the I/O thread once the body is read; hands heavy work
//                               to other threads and calls reply exactly once, from any
//                               thread
//
// A hosting mode (batch transform, multi-model /models/{name}/invoke, ...) is one more
// handler in the RouteTable (route_table.h), not more code in the session.
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "serving/http/http_error.h"

namespace mrcnn::serving {

struct RouteAnswer {
  unsigned status = 200;
  std::string body;
  std::string content_type;  // empty: no Content-Type header (an empty /ping answer)
  HttpHeaders headers;
};

// {"error": code, "detail": ...}, the body of every error answer (arbitrary bytes in code or
// detail are replaced, never thrown).
std::string EncodeErrorJson(const std::string& code, const std::string& detail);

// That body as application/json, with the error's headers.
RouteAnswer ErrorAnswer(const HttpError& error);
RouteAnswer ErrorAnswer(unsigned status, const std::string& code, const std::string& detail);

struct RequestHead {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string path;                           // the target without its query
  std::map<std::string, std::string> params;  // {name} segments of the route pattern, raw
  const boost::beast::http::request_header<>& fields;
  std::chrono::steady_clock::time_point received_at;  // when the first header byte came
};

// Any thread. The first call answers the request; a later one (a result that comes after
// the deadline already answered) is dropped.
using Reply = std::function<void(RouteAnswer)>;

struct Exchange {
  std::function<void(std::vector<uint8_t> body, Reply reply)> run;
  HttpHeaders headers;  // added to every answer of this request, errors included
  // When set, the session answers deadline_answer at this time unless reply came first.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  RouteAnswer deadline_answer;
};

using RouteHandler = std::function<Exchange(const RequestHead& head)>;

// An exchange that answers `answer` on the I/O thread as soon as the body is in, whatever it
// holds (/ping, metadata, refusals): it never waits behind decoding or the model.
Exchange ImmediateExchange(RouteAnswer answer);

}  // namespace mrcnn::serving
