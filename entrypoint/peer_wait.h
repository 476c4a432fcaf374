#pragma once
// Before a multi-host launch: every host must resolve and the master must be
// reachable, or the trainers would die in their first collective with an
// unhelpful timeout (hosts named algo-N resolve only once the cluster is up).
//
// "Master reachable" is a tiny rendezvous over TCP, separate from the trainers'
// own store so it works before any trainer runs:
//  - the master's supervisor (node rank 0) listens on master_addr:port, where
//    port defaults to MASTER_PORT + 1 (env MRCNN_RENDEZVOUS_PORT overrides);
//  - every other supervisor connects and sends "mrcnn-rendezvous 1 node <rank> nnodes <n>\n";
//  - the master answers "ok nnodes <n>\n" and closes. A worker whose node count
//    differs from the master's fails at once (inconsistent configuration), any
//    other failure (refused, reset, timeout) is retried with backoff;
//  - the master launches when every worker node has checked in, and keeps
//    answering while the job runs, so a restarted worker still gets through.
// Everything is bounded by one deadline; on expiry the error says what was
// still missing.
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::entrypoint {

// Peers did not show up in time, or disagree about the job.
class PeerWaitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The wait was abandoned because the supervisor was asked to stop (the Sleeper
// returned false): not a failure of the job's configuration.
class PeerWaitStopped : public PeerWaitError {
 public:
  using PeerWaitError::PeerWaitError;
};

// Sleeps for the given time; returns false when the wait should be abandoned
// (the supervisor was asked to stop).
using Sleeper = std::function<bool(std::chrono::milliseconds)>;

struct PeerWaitPlan {
  std::vector<std::string> hosts;  // every host that must resolve
  std::string master_addr;
  int rendezvous_port = 0;
  int node_rank = 0;
  int nnodes = 1;
  std::chrono::milliseconds timeout{15 * 60 * 1000};
  std::chrono::milliseconds first_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
};

// The master's side of the rendezvous.
class RendezvousListener {
 public:
  // Binds master_addr:port (the wildcard address when master_addr is not one of
  // ours, e.g. a Kubernetes service name). Throws PeerWaitError.
  RendezvousListener(const std::string& master_addr, int port, int nnodes);
  ~RendezvousListener();
  RendezvousListener(const RendezvousListener&) = delete;
  RendezvousListener& operator=(const RendezvousListener&) = delete;

  int fd() const { return fd_; }
  // Accepts and answers every pending connection without blocking for long.
  void AnswerPending();
  const std::set<int>& checked_in() const { return checked_in_; }

 private:
  int fd_ = -1;
  int nnodes_;
  std::set<int> checked_in_;
};

// Blocks until every host in plan.hosts resolves. Throws PeerWaitError.
void WaitForHostsToResolve(const PeerWaitPlan& plan, std::chrono::steady_clock::time_point deadline,
                           const Sleeper& sleep);

// Worker side: retries until the master answers. Throws PeerWaitError.
void CheckInWithMaster(const PeerWaitPlan& plan, std::chrono::steady_clock::time_point deadline,
                       const Sleeper& sleep);

// Master side: answers until every node 1..nnodes-1 has checked in. Throws PeerWaitError.
void WaitForWorkers(RendezvousListener& listener, const PeerWaitPlan& plan,
                    std::chrono::steady_clock::time_point deadline, const Sleeper& sleep);

}  // namespace mrcnn::entrypoint
