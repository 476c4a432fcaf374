#pragma once
// Plain TCP plumbing for the ring all-reduce: a listening socket, a connection to a peer
// with a connect timeout, and a full-duplex exchange (send to one peer while receiving
// from another) driven by poll(), so neither direction can deadlock on full socket
// buffers and a silent or dead peer turns into an exception naming its rank instead of a
// hang. POSIX sockets only; Torch-free.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mrcnn::engine::dist {

// A peer failed: closed its connection, reset it, or sent nothing within the timeout.
class PeerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Owns a socket file descriptor (move-only).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();

 private:
  int fd_ = -1;
};

// Listens on `address` (an IPv4 literal or host name) with a kernel-chosen port.
struct Listener {
  Socket socket;
  std::string address;
  int port = 0;
  static Listener Open(const std::string& address);
  // Accepts one connection; throws PeerError mentioning `who` after `timeout`.
  Socket Accept(std::chrono::milliseconds timeout, const std::string& who) const;
};

// Connects to host:port, retrying refused connections until `timeout` (the peer may not
// listen yet); throws PeerError mentioning `who`.
Socket Connect(const std::string& host, int port, std::chrono::milliseconds timeout,
               const std::string& who);

// The local IPv4 address the kernel would use to reach `host` (no packet is sent), so a
// rank advertises an address its peers can route to; "127.0.0.1" for loopback hosts.
std::string LocalAddressToward(const std::string& host);

// Blocking whole-buffer send / receive on a socket, each bounded by `timeout` without
// progress. `who` names the peer in errors ("rank 2").
void SendAll(const Socket& s, const void* data, size_t bytes, std::chrono::milliseconds timeout,
             const std::string& who);
void RecvAll(const Socket& s, void* data, size_t bytes, std::chrono::milliseconds timeout,
             const std::string& who);

// Sends `send_bytes` on `out` while receiving `recv_bytes` on `in`, concurrently. Throws
// PeerError naming `out_who` / `in_who` when that side closes, fails, or makes no progress
// for `timeout`.
void Exchange(const Socket& out, const void* send, size_t send_bytes, const std::string& out_who,
              const Socket& in, void* recv, size_t recv_bytes, const std::string& in_who,
              std::chrono::milliseconds timeout);

}  // namespace mrcnn::engine::dist
