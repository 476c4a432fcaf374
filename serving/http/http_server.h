#pragma once
// The HTTP/1.1 side of the server (Boost.Beast, keep-alive): connections only. I/O threads
// read a request's headers, look its route up in a RouteTable (route_table.h; the SageMaker
// routes are in routes/sagemaker_routes.h), read the body, hand it to the route (route.h) and
// write whatever the route answers (session.h, by duty). Routes hand heavy work to other threads,
// so /ping is answered in milliseconds whatever the model does. Every error has a JSON body
// {"error": code, "detail": why}.
//
// Per connection: idle keep-alive time, header time and body time are limited separately
// (a slow client holds one socket, never a worker thread). A body over the payload limit is
// refused from its Content-Length (or while reading, when chunked) without reading on. A body
// may take body_timeout plus its length at min_transfer_rate (a 1 GiB async-inference body
// is not cut off at 30 s); a response likewise with write_timeout. Other errors decided from
// the headers (404, 405, and whatever a route refuses: 406, 415, bad attributes) are sent
// after the body is read, so the keep-alive connection stays usable; with
// Expect: 100-continue they are sent at once and the body is never requested.
//
// Drain (SIGTERM/SIGINT or BeginDrain): stop accepting, /ping answers 503, idle
// connections close, requests already received finish (each answered with
// Connection: close), then Run() returns; after drain_timeout it returns anyway.
#include <atomic>
#include <cstdint>
#include <memory>

#include "serving/http/http_options.h"
#include "serving/http/route_table.h"
#include "serving/http/server_lifecycle.h"

namespace mrcnn::serving {

class ServerMetrics;  // serving/metrics/server_metrics.h

class HttpServer {
 public:
  // routes and lifecycle must outlive the server; lifecycle's in-flight count is what the
  // drain waits for, besides open connections. metrics, when given (and outliving the
  // server), counts every answer by method, route pattern and status, with its latency.
  HttpServer(const HttpOptions& options, const RouteTable& routes, ServerLifecycle& lifecycle,
             ServerMetrics* metrics = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns the bound port (useful with port 0). Throws on bind errors.
  uint16_t Listen();
  // Serves until drained. Returns true when every in-flight request finished, false when
  // drain_timeout cut some off.
  bool Run();
  // Thread-safe; what SIGTERM does.
  void BeginDrain();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace mrcnn::serving
