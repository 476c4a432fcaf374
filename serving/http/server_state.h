#pragma once
// Inside http/ only: what the listening server (http_server.cpp) and its connections
// (session.h) share: the options, the route table, the lifecycle, the io_context and the
// live sessions the drain visits.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <csignal>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "serving/http/http_server.h"
#include "serving/metrics/server_metrics.h"

namespace mrcnn::serving {

class HttpSession;

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(const HttpOptions& options, const RouteTable& route_table,
        ServerLifecycle& server_lifecycle, ServerMetrics* server_metrics)
      : config(options),
        routes(route_table),
        lifecycle(server_lifecycle),
        metrics(server_metrics),
        ioc(config.io_threads),
        acceptor(boost::asio::make_strand(ioc)),
        signals(ioc, SIGTERM, SIGINT),
        drain_timer(ioc),
        accept_retry(acceptor.get_executor()) {}

  void DoAccept();
  void WaitForSignal();
  void BeginDrain();
  void PollDrain();

  void Register(HttpSession* session, std::weak_ptr<HttpSession> weak) {
    std::lock_guard lock(sessions_mutex);
    sessions.emplace(session, std::move(weak));
  }
  void Unregister(HttpSession* session) {
    std::lock_guard lock(sessions_mutex);
    sessions.erase(session);
  }
  size_t SessionCount() {
    std::lock_guard lock(sessions_mutex);
    return sessions.size();
  }

  const HttpOptions config;
  const RouteTable& routes;
  ServerLifecycle& lifecycle;
  ServerMetrics* const metrics;  // may be null
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor;
  boost::asio::signal_set signals;
  boost::asio::steady_timer drain_timer;
  boost::asio::steady_timer accept_retry;
  std::chrono::steady_clock::time_point drain_deadline;
  std::atomic<bool> drained_cleanly{true};
  std::mutex sessions_mutex;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
};

}  // namespace mrcnn::serving
