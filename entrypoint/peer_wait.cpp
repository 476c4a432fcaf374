#include "entrypoint/peer_wait.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "entrypoint/fd_io.h"

namespace mrcnn::entrypoint {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kConnectTimeout{2000};
constexpr milliseconds kReplyTimeout{5000};

long SecondsLeft(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
}

// Exponential backoff bounded by the deadline. Throws when time is up or the
// sleep was interrupted.
class Backoff {
 public:
  Backoff(const PeerWaitPlan& plan, Clock::time_point deadline, const Sleeper& sleep)
      : next_(plan.first_backoff), max_(plan.max_backoff), deadline_(deadline), sleep_(sleep) {}

  void Wait(const std::string& what_is_missing) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) {
      throw PeerWaitError(fmt::format("gave up waiting for peers: {}", what_is_missing));
    }
    if (!sleep_(std::min(next_, left))) {
      throw PeerWaitStopped(fmt::format("stopped while waiting for peers: {}", what_is_missing));
    }
    next_ = std::min(next_ * 2, max_);
  }

 private:
  milliseconds next_;
  milliseconds max_;
  Clock::time_point deadline_;
  const Sleeper& sleep_;
};

struct AddressList {
  addrinfo* head = nullptr;
  ~AddressList() {
    if (head != nullptr)
      freeaddrinfo(head);
  }
};

// getaddrinfo; returns an error text or "" on success.
std::string Resolve(const std::string& host, int port, int flags, AddressList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
  if (rc != 0)
    return gai_strerror(rc);
  return "";
}

bool WaitFor(int fd, short events, milliseconds timeout) {
  pollfd pfd{fd, events, 0};
  for (;;) {
    const int ready = poll(&pfd, 1, static_cast<int>(timeout.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    return ready > 0;
  }
}

// One connection attempt with bounded connect and reply times. Returns the
// reply line, or throws std::runtime_error with the reason.
std::string AskMaster(const PeerWaitPlan& plan) {
  AddressList addresses;
  if (std::string error = Resolve(plan.master_addr, plan.rendezvous_port, 0, addresses);
      !error.empty()) {
    throw std::runtime_error(fmt::format("{} does not resolve: {}", plan.master_addr, error));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = addresses.head; ai != nullptr; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    std::string reply;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::strerror(errno);
    } else if (!WaitFor(fd, POLLOUT, kConnectTimeout)) {
      last_error = "connect timed out";
    } else {
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        last_error = std::strerror(so_error);
      } else {
        const std::string hello =
            fmt::format("mrcnn-rendezvous 1 node {} nnodes {}\n", plan.node_rank, plan.nnodes);
        if (!WriteAll(fd, hello)) {
          last_error = std::strerror(errno);
        } else {
          char buffer[128];
          while (reply.find('\n') == std::string::npos && WaitFor(fd, POLLIN, kReplyTimeout)) {
            const ssize_t n = read(fd, buffer, sizeof(buffer));
            if (n > 0) {
              reply.append(buffer, static_cast<std::size_t>(n));
              continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
              continue;
            break;
          }
          if (reply.find('\n') == std::string::npos)
            last_error = "no answer from the master";
        }
      }
    }
    close(fd);
    if (reply.find('\n') != std::string::npos)
      return reply.substr(0, reply.find('\n'));
  }
  throw std::runtime_error(fmt::format("{}:{} is not reachable: {}", plan.master_addr,
                                       plan.rendezvous_port, last_error));
}

}  // namespace

RendezvousListener::RendezvousListener(const std::string& master_addr, int port, int nnodes)
    : nnodes_(nnodes) {
  std::string last_error;
  // Our own address first (bind fails with EADDRNOTAVAIL when it is not ours),
  // then the wildcard.
  for (const std::string& host : {master_addr, std::string()}) {
    AddressList addresses;
    last_error = Resolve(host, port, AI_PASSIVE, addresses);
    if (!last_error.empty())
      continue;
    for (addrinfo* ai = addresses.head; ai != nullptr; ai = ai->ai_next) {
      const int fd =
          socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (fd < 0)
        continue;
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
        fd_ = fd;
        return;
      }
      last_error = std::strerror(errno);
      close(fd);
    }
  }
  throw PeerWaitError(fmt::format(
      "cannot listen for peers on {}:{} (MASTER_PORT + 1, or MRCNN_RENDEZVOUS_PORT): {}",
      master_addr, port, last_error));
}

RendezvousListener::~RendezvousListener() {
  if (fd_ >= 0)
    close(fd_);
}

void RendezvousListener::AnswerPending() {
  for (;;) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return;  // EAGAIN: nobody else waiting
    std::string hello;
    char buffer[128];
    while (hello.size() < 256 && hello.find('\n') == std::string::npos &&
           WaitFor(fd, POLLIN, milliseconds(2000))) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n > 0) {
        hello.append(buffer, static_cast<std::size_t>(n));
      } else if (!(n < 0 && (errno == EAGAIN || errno == EINTR))) {
        break;
      }
    }
    int node = -1;
    int their_nnodes = -1;
    if (std::sscanf(hello.c_str(), "mrcnn-rendezvous 1 node %d nnodes %d", &node, &their_nnodes) ==
        2) {
      if (their_nnodes == nnodes_ && node > 0 && node < nnodes_)
        checked_in_.insert(node);
      if (their_nnodes != nnodes_) {
        LogLine(fmt::format("node {} believes the job has {} nodes, we have {}", node, their_nnodes,
                            nnodes_));
      }
      WriteAll(fd, fmt::format("ok nnodes {}\n", nnodes_));
    }
    close(fd);
  }
}

void WaitForHostsToResolve(const PeerWaitPlan& plan, Clock::time_point deadline,
                           const Sleeper& sleep) {
  Backoff backoff(plan, deadline, sleep);
  for (;;) {
    std::vector<std::string> missing;
    std::string first_error;
    for (const auto& host : plan.hosts) {
      AddressList addresses;
      if (std::string error = Resolve(host, 0, 0, addresses); !error.empty()) {
        if (first_error.empty())
          first_error = error;
        missing.push_back(host);
      }
    }
    if (missing.empty())
      return;
    const std::string what =
        fmt::format("hosts {} do not resolve ({})", fmt::join(missing, ", "), first_error);
    LogLine(fmt::format("waiting: {}; {} s left", what, SecondsLeft(deadline)));
    backoff.Wait(what);
  }
}

void CheckInWithMaster(const PeerWaitPlan& plan, Clock::time_point deadline, const Sleeper& sleep) {
  Backoff backoff(plan, deadline, sleep);
  for (;;) {
    std::string what;
    try {
      const std::string reply = AskMaster(plan);
      int master_nnodes = -1;
      if (std::sscanf(reply.c_str(), "ok nnodes %d", &master_nnodes) == 1) {
        if (master_nnodes != plan.nnodes) {
          throw PeerWaitError(fmt::format(
              "the master {} runs a job of {} nodes, this node was configured for {}: check that "
              "every host has the same resourceconfig.json hosts (or launcher variables)",
              plan.master_addr, master_nnodes, plan.nnodes));
        }
        LogLine(fmt::format("master {} is reachable", plan.master_addr));
        return;
      }
      what = fmt::format("unexpected answer from the master {}: \"{}\"", plan.master_addr, reply);
    } catch (const PeerWaitError&) {
      throw;
    } catch (const std::exception& error) {
      what = error.what();
    }
    LogLine(fmt::format("waiting for the master: {}; {} s left", what, SecondsLeft(deadline)));
    backoff.Wait(what);
  }
}

void WaitForWorkers(RendezvousListener& listener, const PeerWaitPlan& plan,
                    Clock::time_point deadline, const Sleeper& sleep) {
  auto next_log = Clock::now() + std::chrono::seconds(5);
  for (;;) {
    listener.AnswerPending();
    std::vector<int> missing;
    for (int node = 1; node < plan.nnodes; ++node) {
      if (listener.checked_in().count(node) == 0)
        missing.push_back(node);
    }
    if (missing.empty()) {
      LogLine(fmt::format("all {} nodes checked in", plan.nnodes));
      return;
    }
    const std::string what = fmt::format("nodes {} have not checked in", fmt::join(missing, ", "));
    const auto now = Clock::now();
    if (now >= deadline)
      throw PeerWaitError(fmt::format("gave up waiting for peers: {}", what));
    if (now >= next_log) {
      LogLine(fmt::format("waiting: {}; {} s left", what, SecondsLeft(deadline)));
      next_log = now + std::chrono::seconds(10);
    }
    const auto slice =
        std::min(milliseconds(200), std::chrono::duration_cast<milliseconds>(deadline - now));
    WaitFor(listener.fd(), POLLIN, slice);
    if (!sleep(milliseconds(0))) {
      throw PeerWaitStopped(fmt::format("stopped while waiting for peers: {}", what));
    }
  }
}

}  // namespace mrcnn::entrypoint
