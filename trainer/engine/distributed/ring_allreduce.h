#pragma once
// Ring collectives over TCP for CPU data-parallel training.
//
// Why our own: the PyPI torch wheel ships libtorch with Gloo compiled in but without the
// gloo headers, and Debian's libgloo-dev is an older Gloo whose Store/Context classes
// differ in layout from the wheel's (trainer/engine/README.md, "Deviations and limits"), so
// ProcessGroupGloo cannot be constructed safely from C++ against the wheel. A
// ring all-reduce (reduce-scatter then all-gather, Patarasuk & Yuan) is a few hundred
// lines and moves 2 (W-1)/W of the buffer per rank, the bandwidth optimum.
//
// Each rank connects to its successor (rank+1 mod W) and accepts its predecessor; the
// listening addresses are exchanged through the rendezvous store. Every step sends one
// chunk downstream while receiving another from upstream (tcp_link.h: poll-driven, so no
// deadlock and no hang: a closed, reset or silent peer becomes a PeerError naming its
// rank).
//
// Determinism: chunk c is summed along the ring in a fixed order (starting at rank c)
// and its final value is computed once, by one rank, then copied to all others in the
// all-gather. So every rank ends with bit-identical results, and the same inputs give the
// same bits on every run. Torch-free.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/distributed/kv_store.h"
#include "trainer/engine/distributed/tcp_link.h"

namespace mrcnn::engine::dist {

struct RingOptions {
  // Longest wait for a peer to make progress (connect, send or receive) before the
  // collective throws PeerError. Collectives after which one rank does long solo work
  // (evaluation, checkpointing) pass their own, longer timeout to Barrier().
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // The address this rank listens on and advertises to its predecessor.
  std::string listen_address = "127.0.0.1";
  // Prefix of the store keys, so several rings (tests) can share a store.
  std::string key_prefix = "mrcnn/ring";
  // Where this rank runs, e.g. "local rank 1 on algo-2": published in the store, so a
  // peer's errors about this rank say which process on which host died or stalled.
  std::string description;
};

class RingCommunicator {
 public:
  // Collective: every rank of the world calls it. world_size 1 needs no store or socket.
  static std::unique_ptr<RingCommunicator> Connect(KeyValueStore* store, int rank, int world_size,
                                                   const RingOptions& options);

  int rank() const { return rank_; }
  int world_size() const { return world_; }

  // In-place sum over all ranks; every rank must pass the same count (checked: a mismatch
  // throws naming the predecessor's count). count may be 0 or smaller than world_size.
  void AllReduceSum(float* data, size_t count);
  // In-place sum for small double vectors (losses, stop flags), same order guarantees.
  void AllReduceSum(double* data, size_t count);
  // Copies root's `bytes` bytes to every rank (pipelined along the ring in 1 MiB pieces).
  void Broadcast(void* data, size_t bytes, int root);
  // Returns when every rank has reached it; waits up to `timeout` for the slowest.
  void Barrier(std::chrono::milliseconds timeout);

  // Closes both connections; peers blocked in a collective with this rank get PeerError.
  void Close();
  // Shuts both connections down without closing them: safe while another thread is inside
  // a collective, which then fails at once (PeerError), as do the peers. For abandoning a
  // communication thread's collective; the ring is unusable afterwards.
  void Interrupt();

 private:
  RingCommunicator(int rank, int world, const RingOptions& options);
  template <typename T>
  void AllReduceSumImpl(T* data, size_t count, uint32_t op, std::chrono::milliseconds timeout);
  // Sends a frame header downstream and checks the one from upstream matches (same
  // collective, same sequence number, same size on both ranks).
  void CheckHeader(uint32_t op, uint64_t count, std::chrono::milliseconds timeout);
  // "rank 3 (local rank 1 on algo-2)", or "rank 3" before the peer's description is known.
  std::string Who(int peer) const;
  int next() const { return (rank_ + 1) % world_; }
  int prev() const { return (rank_ + world_ - 1) % world_; }

  int rank_, world_;
  RingOptions options_;
  Socket to_next_, from_prev_;
  std::string next_description_, prev_description_;
  uint64_t sequence_ = 0;
  std::vector<char> scratch_;
};

}  // namespace mrcnn::engine::dist
