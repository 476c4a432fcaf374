#include "trainer/engine/distributed/tcp_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace mrcnn::engine::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string Errno(int err) {
  return std::strerror(err);
}

std::string Seconds(milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(t.count()) / 1000.0);
  return text;
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw std::runtime_error("fcntl(O_NONBLOCK) failed: " + Errno(errno));
}

void SetNoDelay(int fd) {
  // Each ring step waits for the previous one's data: Nagle's delay would add up to 40 ms
  // per small message (the per-step loss/stop all-reduce is a few bytes).
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

sockaddr_in Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw std::runtime_error("cannot resolve host \"" + host + "\": " + gai_strerror(rc));
  }
  sockaddr_in addr{};
  std::memcpy(&addr, result->ai_addr, sizeof(addr));
  freeaddrinfo(result);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

Listener Listener::Open(const std::string& address) {
  Listener l;
  sockaddr_in addr = Resolve(address, 0);
  l.socket = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.socket.valid())
    throw std::runtime_error("socket() failed: " + Errno(errno));
  if (::bind(l.socket.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw std::runtime_error("cannot listen on " + address + ": bind failed: " + Errno(errno) +
                             " (set MRCNN_DIST_ADDR to an address of this host)");
  }
  if (::listen(l.socket.fd(), 16) != 0)
    throw std::runtime_error("listen() on " + address + " failed: " + Errno(errno));
  socklen_t len = sizeof(addr);
  getsockname(l.socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  SetNonBlocking(l.socket.fd());
  l.address = address;
  l.port = ntohs(addr.sin_port);
  return l;
}

Socket Listener::Accept(milliseconds timeout, const std::string& who) const {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    pollfd p{socket.fd(), POLLIN, 0};
    const int rc = ::poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0)
      throw std::runtime_error("poll() on the listening socket failed: " + Errno(errno));
    if (rc == 0) {
      throw PeerError(who + " did not connect within " + Seconds(timeout) + " (did it start? is " +
                      address + ":" + std::to_string(port) + " reachable from it?)");
    }
    const int fd = ::accept4(socket.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      continue;
    if (fd < 0)
      throw std::runtime_error("accept() failed: " + Errno(errno));
    SetNoDelay(fd);
    return Socket(fd);
  }
}

Socket Connect(const std::string& host, int port, milliseconds timeout, const std::string& who) {
  const sockaddr_in addr = Resolve(host, port);
  const auto deadline = Clock::now() + timeout;
  std::string last = "timed out";
  while (Clock::now() < deadline) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid())
      throw std::runtime_error("socket() failed: " + Errno(errno));
    int err = 0;
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s.fd(), POLLOUT, 0};
        int rc;
        do {
          rc = ::poll(&p, 1, RemainingMs(deadline));
        } while (rc < 0 && errno == EINTR);
        socklen_t len = sizeof(err);
        err = rc == 0 ? ETIMEDOUT : 0;
        if (rc > 0)
          getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      SetNoDelay(s.fd());
      return s;
    }
    last = Errno(err);
    std::this_thread::sleep_for(milliseconds(50));
  }
  throw PeerError("cannot connect to " + who + " at " + host + ":" + std::to_string(port) +
                  " within " + Seconds(timeout) + ": " + last);
}

std::string LocalAddressToward(const std::string& host) {
  sockaddr_in peer = Resolve(host, 9);
  if ((ntohl(peer.sin_addr.s_addr) >> 24) == 127)
    return "127.0.0.1";
  Socket s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid() || ::connect(s.fd(), reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0)
    throw std::runtime_error("no route from this host to " + host + ": " + Errno(errno));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

void Exchange(const Socket& out, const void* send, size_t send_bytes, const std::string& out_who,
              const Socket& in, void* recv, size_t recv_bytes, const std::string& in_who,
              milliseconds timeout) {
  const auto* send_ptr = static_cast<const char*>(send);
  auto* recv_ptr = static_cast<char*>(recv);
  size_t sent = 0, received = 0;
  auto deadline = Clock::now() + timeout;  // reset on every bit of progress
  while (sent < send_bytes || received < recv_bytes) {
    pollfd p[2];
    nfds_t n = 0;
    int send_slot = -1, recv_slot = -1;
    if (sent < send_bytes) {
      send_slot = static_cast<int>(n);
      p[n++] = pollfd{out.fd(), POLLOUT, 0};
    }
    if (received < recv_bytes) {
      recv_slot = static_cast<int>(n);
      p[n++] = pollfd{in.fd(), POLLIN, 0};
    }
    const int rc = ::poll(p, n, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR)
      continue;  // a signal (SIGTERM sets the stop flag); keep going, the loop agrees on it
    if (rc < 0)
      throw std::runtime_error("poll() failed: " + Errno(errno));
    if (rc == 0) {
      if (received < recv_bytes) {
        throw PeerError("no data from " + in_who + " for " + Seconds(timeout) + " (received " +
                        std::to_string(received) + " of " + std::to_string(recv_bytes) +
                        " bytes): it is stuck or gone");
      }
      throw PeerError(out_who + " read nothing for " + Seconds(timeout) + " (sent " +
                      std::to_string(sent) + " of " + std::to_string(send_bytes) +
                      " bytes): it is stuck or gone");
    }
    bool progress = false;
    if (send_slot >= 0 && p[send_slot].revents != 0) {
      const ssize_t k = ::send(out.fd(), send_ptr + sent, send_bytes - sent, MSG_NOSIGNAL);
      if (k > 0) {
        sent += static_cast<size_t>(k);
        progress = true;
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw PeerError("sending to " + out_who + " failed: " + Errno(errno) +
                        " (it closed the connection: see its log for why)");
      }
    }
    if (recv_slot >= 0 && p[recv_slot].revents != 0) {
      const ssize_t k = ::recv(in.fd(), recv_ptr + received, recv_bytes - received, 0);
      if (k > 0) {
        received += static_cast<size_t>(k);
        progress = true;
      } else if (k == 0) {
        throw PeerError(in_who + " closed the connection (received " + std::to_string(received) +
                        " of " + std::to_string(recv_bytes) + " bytes): see its log for why");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw PeerError("receiving from " + in_who + " failed: " + Errno(errno) +
                        " (see its log for why)");
      }
    }
    if (progress)
      deadline = Clock::now() + timeout;
  }
}

void SendAll(const Socket& s, const void* data, size_t bytes, milliseconds timeout,
             const std::string& who) {
  Exchange(s, data, bytes, who, s, nullptr, 0, who, timeout);
}

void RecvAll(const Socket& s, void* data, size_t bytes, milliseconds timeout,
             const std::string& who) {
  Exchange(s, nullptr, 0, who, s, data, bytes, who, timeout);
}

}  // namespace mrcnn::engine::dist
