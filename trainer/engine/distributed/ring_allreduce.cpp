#include "trainer/engine/distributed/ring_allreduce.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mrcnn::engine::dist {
namespace {

constexpr uint32_t kMagic = 0x4d52524e;  // "MRRN"
constexpr uint32_t kOpAllReduceFloat = 1, kOpAllReduceDouble = 2, kOpBroadcast = 3, kOpBarrier = 4;
constexpr size_t kBroadcastPiece = size_t{1} << 20;

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world;
};

struct Header {
  uint32_t magic;
  uint32_t op;
  uint64_t sequence;
  uint64_t count;
};

const char* OpName(uint32_t op) {
  switch (op) {
    case kOpAllReduceFloat:
      return "all-reduce(float32)";
    case kOpAllReduceDouble:
      return "all-reduce(float64)";
    case kOpBroadcast:
      return "broadcast";
    case kOpBarrier:
      return "barrier";
    default:
      return "unknown collective";
  }
}

std::pair<std::string, int> SplitHostPort(const std::string& key, const std::string& value) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("store key " + key + " holds \"" + value + "\", not host:port");
  return {value.substr(0, colon), std::stoi(value.substr(colon + 1))};
}

// Chunk i of a W-way split of n elements: [n*i/W, n*(i+1)/W). Sizes differ by at most one;
// with n < W some chunks are empty, which the exchange handles as zero-byte transfers.
size_t ChunkBegin(size_t n, int i, int world) {
  return n * static_cast<size_t>(i) / static_cast<size_t>(world);
}

}  // namespace

RingCommunicator::RingCommunicator(int rank, int world, const RingOptions& options)
    : rank_(rank), world_(world), options_(options) {}

std::unique_ptr<RingCommunicator> RingCommunicator::Connect(KeyValueStore* store, int rank,
                                                            int world_size,
                                                            const RingOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("RingCommunicator: rank " + std::to_string(rank) +
                                " is not in [0, world_size " + std::to_string(world_size) + ")");
  }
  std::unique_ptr<RingCommunicator> ring(new RingCommunicator(rank, world_size, options));
  if (world_size == 1)
    return ring;
  if (store == nullptr)
    throw std::invalid_argument("RingCommunicator: world_size > 1 needs a store");
  // Listen before publishing the address, so the predecessor's connect finds a backlog
  // even if this rank has not reached accept() yet; connect first, then accept: with every
  // rank doing the same no one waits on someone who waits on them. The description goes
  // first, so a rank whose address is in the store has its description there too.
  const auto key = [&](const char* what, int r) {
    return options.key_prefix + "/" + what + "/" + std::to_string(r);
  };
  Listener listener = Listener::Open(options.listen_address);
  store->Set(key("who", rank), options.description);
  store->Set(key("addr", rank), listener.address + ":" + std::to_string(listener.port));
  const std::string next_key = key("addr", ring->next());
  const auto [host, port] = SplitHostPort(next_key, store->Get(next_key, options.timeout));
  ring->next_description_ = store->Get(key("who", ring->next()), options.timeout);
  ring->to_next_ = dist::Connect(host, port, options.timeout, ring->Who(ring->next()));
  const Hello mine{kMagic, rank, world_size};
  SendAll(ring->to_next_, &mine, sizeof(mine), options.timeout, ring->Who(ring->next()));
  ring->from_prev_ = listener.Accept(options.timeout, ring->Who(ring->prev()));
  ring->prev_description_ = store->Get(key("who", ring->prev()), options.timeout);
  Hello theirs{};
  RecvAll(ring->from_prev_, &theirs, sizeof(theirs), options.timeout, ring->Who(ring->prev()));
  if (theirs.magic != kMagic || theirs.rank != ring->prev() || theirs.world != world_size) {
    throw std::runtime_error(
        "ring setup: expected rank " + std::to_string(ring->prev()) + " of " +
        std::to_string(world_size) + " to connect, got a peer calling itself rank " +
        std::to_string(theirs.rank) + " of " + std::to_string(theirs.world) +
        " (two jobs sharing MASTER_ADDR:MASTER_PORT? give each its own MASTER_PORT)");
  }
  return ring;
}

std::string RingCommunicator::Who(int peer) const {
  const std::string* description = nullptr;
  if (peer == next())
    description = &next_description_;
  else if (peer == prev())
    description = &prev_description_;
  else if (peer == rank_)
    description = &options_.description;
  std::string who = "rank " + std::to_string(peer);
  if (description != nullptr && !description->empty())
    who.append(" (").append(*description).append(")");
  return who;
}

void RingCommunicator::CheckHeader(uint32_t op, uint64_t count, std::chrono::milliseconds timeout) {
  if (!to_next_.valid() || !from_prev_.valid())
    throw std::logic_error("RingCommunicator: used after Close()");
  const Header mine{kMagic, op, sequence_++, count};
  Header theirs{};
  Exchange(to_next_, &mine, sizeof(mine), Who(next()), from_prev_, &theirs, sizeof(theirs),
           Who(prev()), timeout);
  if (theirs.magic != kMagic || theirs.op != mine.op || theirs.sequence != mine.sequence ||
      theirs.count != mine.count) {
    throw std::runtime_error(
        "ranks disagree on the collective: " + Who(prev()) + " is in " + OpName(theirs.op) + " #" +
        std::to_string(theirs.sequence) + " of " + std::to_string(theirs.count) + " elements, " +
        Who(rank_) + " in " + OpName(op) + " #" + std::to_string(mine.sequence) + " of " +
        std::to_string(count) + " (every rank must run the same collectives with the same sizes)");
  }
}

template <typename T>
void RingCommunicator::AllReduceSumImpl(T* data, size_t count, uint32_t op,
                                        std::chrono::milliseconds timeout) {
  if (world_ == 1)
    return;
  CheckHeader(op, count, timeout);
  if (count == 0)
    return;
  const auto chunk = [&](int i) {
    const int c = ((i % world_) + world_) % world_;
    const size_t begin = ChunkBegin(count, c, world_);
    return std::pair<T*, size_t>{data + begin, ChunkBegin(count, c + 1, world_) - begin};
  };
  scratch_.resize((count / static_cast<size_t>(world_) + 1) * sizeof(T));
  T* incoming = reinterpret_cast<T*>(scratch_.data());
  // Reduce-scatter: after W-1 steps rank r holds the full sum of chunk r+1.
  for (int step = 0; step < world_ - 1; ++step) {
    const auto [send, send_n] = chunk(rank_ - step);
    const auto [recv, recv_n] = chunk(rank_ - step - 1);
    Exchange(to_next_, send, send_n * sizeof(T), Who(next()), from_prev_, incoming,
             recv_n * sizeof(T), Who(prev()), timeout);
    for (size_t k = 0; k < recv_n; ++k)
      recv[k] = incoming[k] + recv[k];
  }
  // All-gather: pass the finished chunks around; received data lands in place.
  for (int step = 0; step < world_ - 1; ++step) {
    const auto [send, send_n] = chunk(rank_ + 1 - step);
    const auto [recv, recv_n] = chunk(rank_ - step);
    Exchange(to_next_, send, send_n * sizeof(T), Who(next()), from_prev_, recv, recv_n * sizeof(T),
             Who(prev()), timeout);
  }
}

void RingCommunicator::AllReduceSum(float* data, size_t count) {
  AllReduceSumImpl(data, count, kOpAllReduceFloat, options_.timeout);
}

void RingCommunicator::AllReduceSum(double* data, size_t count) {
  AllReduceSumImpl(data, count, kOpAllReduceDouble, options_.timeout);
}

void RingCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (world_ == 1)
    return;
  if (root < 0 || root >= world_)
    throw std::invalid_argument("Broadcast: root " + std::to_string(root) + " is not a rank");
  CheckHeader(kOpBroadcast, bytes, options_.timeout);
  // A chain root -> root+1 -> ... -> root-1, in pieces so the ranks forward concurrently.
  auto* p = static_cast<char*>(data);
  for (size_t offset = 0; offset < bytes; offset += kBroadcastPiece) {
    const size_t n = std::min(kBroadcastPiece, bytes - offset);
    if (rank_ != root)
      RecvAll(from_prev_, p + offset, n, options_.timeout, Who(prev()));
    if (next() != root)
      SendAll(to_next_, p + offset, n, options_.timeout, Who(next()));
  }
}

void RingCommunicator::Barrier(std::chrono::milliseconds timeout) {
  if (world_ == 1)
    return;
  double token = 0;
  AllReduceSumImpl(&token, 1, kOpBarrier, timeout);
}

void RingCommunicator::Interrupt() {
  for (Socket* s : {&to_next_, &from_prev_}) {
    if (s->valid())
      ::shutdown(s->fd(), SHUT_RDWR);
  }
}

void RingCommunicator::Close() {
  // shutdown() first so a peer blocked in recv sees EOF at once even if a forked child
  // still holds a copy of the descriptor.
  for (Socket* s : {&to_next_, &from_prev_}) {
    if (s->valid())
      ::shutdown(s->fd(), SHUT_RDWR);
    s->Close();
  }
}

}  // namespace mrcnn::engine::dist
