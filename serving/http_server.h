#pragma once
// The HTTP/1.1 side of the server (Boost.Beast, keep-alive). I/O threads only parse, route
// and write: request decoding and response encoding run on a CPU pool and the model on the
// InferenceExecutor's thread, so /ping is answered in milliseconds whatever the model does.
//
// Routes: GET /ping, GET /execution-parameters, POST /invocations (see response_encoding.h
// for the body). Every error has a JSON body {"error": code, "detail": why}.
//
// Per connection: idle keep-alive time, header time and body time are limited separately
// (a slow client holds one socket, never a worker thread). A body over the payload limit is
// refused from its Content-Length (or while reading, when chunked) without reading on. Other
// errors decided from the headers (404, 405, 406, 415, bad attributes, not ready) are sent
// after the body is read, so the keep-alive connection stays usable; with
// Expect: 100-continue they are sent at once and the body is never requested.
//
// Drain (SIGTERM/SIGINT or BeginDrain): stop accepting, /ping answers 503, idle
// connections close, requests already received finish (each answered with
// Connection: close), then Run() returns; after drain_timeout it returns anyway.
#include <atomic>
#include <cstdint>
#include <memory>

#include "serving/inference_executor.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

class HttpServer {
 public:
  HttpServer(const ServerConfig& config, InferenceExecutor& executor);
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
