#include "serving/http/http_server.h"

#include <fmt/format.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <csignal>
#include <thread>

#include "serving/http/log_line.h"
#include "serving/http/server_state.h"
#include "serving/http/session.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

void HttpServer::State::DoAccept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || ec == net::error::operation_aborted) {
      return;  // draining
    }
    if (ec) {
      // Typically EMFILE: back off instead of spinning on the error.
      LogLine("accept failed: {}; retrying in 50 ms", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code) { DoAccept(); });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    // The State is owned by HttpServer through a shared_ptr; sessions co-own it.
    std::make_shared<HttpSession>(shared_from_this(), std::move(socket))->Start();
    DoAccept();
  });
}

void HttpServer::State::WaitForSignal() {
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) {
      return;
    }
    if (lifecycle.Draining()) {
      LogLine("signal {} again while draining: stopping now", signal);
      drained_cleanly = false;
      ioc.stop();
      return;
    }
    LogLine(
        "signal {}: draining (no new connections, finishing in-flight requests, at most {} "
        "ms)",
        signal, config.drain_timeout.count());
    BeginDrain();
    WaitForSignal();
  });
}

void HttpServer::State::BeginDrain() {
  if (!lifecycle.StartDraining()) {
    return;
  }
  net::post(acceptor.get_executor(), [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
  });
  std::vector<std::shared_ptr<HttpSession>> live;
  {
    std::lock_guard lock(sessions_mutex);
    for (auto& [raw, weak] : sessions) {
      if (auto session = weak.lock()) {
        live.push_back(std::move(session));
      }
    }
  }
  for (auto& session : live) {
    net::post(session->Executor(), [session] { session->OnDrain(); });
  }
  net::post(ioc, [this] {
    drain_deadline = Clock::now() + config.drain_timeout;
    PollDrain();
  });
}

void HttpServer::State::PollDrain() {
  if (SessionCount() == 0 && lifecycle.InFlight() == 0) {
    LogLine("drained: every in-flight request finished");
    ioc.stop();
    return;
  }
  if (Clock::now() >= drain_deadline) {
    LogLine("drain timeout: {} connections and {} requests still in flight are cut off",
            SessionCount(), lifecycle.InFlight());
    drained_cleanly = false;
    ioc.stop();
    return;
  }
  drain_timer.expires_after(std::chrono::milliseconds(10));
  drain_timer.async_wait([this](beast::error_code ec) {
    if (!ec) {
      PollDrain();
    }
  });
}

HttpServer::HttpServer(const HttpOptions& options, const RouteTable& routes,
                       ServerLifecycle& lifecycle, ServerMetrics* metrics)
    : state_(std::make_shared<State>(options, routes, lifecycle, metrics)) {}

HttpServer::~HttpServer() {
  state_->ioc.stop();
}

uint16_t HttpServer::Listen() {
  auto& acceptor = state_->acceptor;
  const tcp::endpoint endpoint(net::ip::make_address(state_->config.host), state_->config.port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  return acceptor.local_endpoint().port();
}

bool HttpServer::Run() {
  std::signal(SIGPIPE, SIG_IGN);
  state_->DoAccept();
  state_->WaitForSignal();
  std::vector<std::thread> threads;
  for (int i = 1; i < state_->config.io_threads; ++i) {
    threads.emplace_back([this] { state_->ioc.run(); });
  }
  state_->ioc.run();
  for (auto& thread : threads) {
    thread.join();
  }
  return state_->drained_cleanly.load();
}

void HttpServer::BeginDrain() {
  state_->BeginDrain();
}

}  // namespace mrcnn::serving
