// The TCP ring collectives with 2 and 3 "ranks" on threads over loopback: exact sums, odd
// sizes, sizes below the world size, empty buffers, bit-identical results on every rank,
// broadcast, mismatched sizes, and peers that close or stall (an error naming the rank,
// never a hang).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "trainer/engine/distributed/ring_allreduce.h"

using namespace mrcnn::engine::dist;
using namespace std::chrono_literals;

namespace {

// The store the TCPStore stands in for: one map, waiters woken on every Set.
class MemoryStore : public KeyValueStore {
 public:
  void Set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mutex_);
    values_[key] = value;
    changed_.notify_all();
  }
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      throw std::runtime_error("store: no key " + key);
    return values_[key];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// Runs body(ring) for every rank on its own thread, rank r with options_of(r); returns each
// rank's exception (or null).
std::vector<std::exception_ptr> RunRanks(int world,
                                         const std::function<RingOptions(int)>& options_of,
                                         const std::function<void(RingCommunicator&)>& body) {
  MemoryStore store;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto ring = RingCommunicator::Connect(&store, r, world, options_of(r));
        body(*ring);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return errors;
}

std::vector<std::exception_ptr> RunRanks(int world, const RingOptions& options,
                                         const std::function<void(RingCommunicator&)>& body) {
  return RunRanks(
      world, [&](int) { return options; }, body);
}

std::string Message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "";
}

void RequireNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    if (errors[r])
      FAIL(Message(errors[r]));
  }
}

RingOptions Options() {
  RingOptions o;
  o.timeout = 20s;
  return o;
}

}  // namespace

TEST_CASE("ring all-reduce sums exactly for 2 and 3 ranks and any size", "[ring]") {
  const int world = GENERATE(2, 3);
  // 0 (empty), below the world size, odd, and large enough (3 MB) to fill socket buffers.
  const size_t count =
      GENERATE(size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{1001}, size_t{750007});
  INFO("world " << world << " count " << count);
  // Small integers: every partial sum is exact in float32, whatever the order.
  auto value = [](int rank, size_t i) { return static_cast<float>((i * 7 + rank * 13) % 1000); };
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  RequireNoErrors(RunRanks(world, Options(), [&](RingCommunicator& ring) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i)
      data[i] = value(ring.rank(), i);
    ring.AllReduceSum(data.data(), data.size());
    ring.AllReduceSum(data.data(), data.size());  // twice: the sequence numbers advance
    results[static_cast<size_t>(ring.rank())] = std::move(data);
  }));
  for (int r = 0; r < world; ++r) {
    const auto& got = results[static_cast<size_t>(r)];
    REQUIRE(got.size() == count);
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int q = 0; q < world; ++q)
        expected += value(q, i);
      if (got[i] != expected * static_cast<float>(world)) {
        FAIL("rank " << r << " element " << i << ": " << got[i]
                     << " != " << expected * static_cast<float>(world));
      }
    }
  }
}

TEST_CASE("ring all-reduce leaves bit-identical results on every rank", "[ring]") {
  const int world = GENERATE(2, 3);
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  std::vector<std::vector<double>> small(static_cast<size_t>(world));
  RequireNoErrors(RunRanks(world, Options(), [&](RingCommunicator& ring) {
    std::mt19937 gen(static_cast<uint32_t>(ring.rank() + 1));
    std::normal_distribution<float> normal(0.f, 1e3f);
    std::vector<float> data(100003);
    for (auto& v : data)
      v = normal(gen);
    ring.AllReduceSum(data.data(), data.size());
    std::vector<double> d = {0.1 * ring.rank(), 1.0 / (ring.rank() + 3), 7};
    ring.AllReduceSum(d.data(), d.size());
    results[static_cast<size_t>(ring.rank())] = std::move(data);
    small[static_cast<size_t>(ring.rank())] = std::move(d);
  }));
  for (int r = 1; r < world; ++r) {
    REQUIRE(std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(),
                        results[0].size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(small[0].data(), small[static_cast<size_t>(r)].data(),
                        small[0].size() * sizeof(double)) == 0);
  }
  REQUIRE(small[0][2] == 7.0 * world);
}

TEST_CASE("ring broadcast copies the root's bytes to every rank", "[ring]") {
  const int world = GENERATE(2, 3);
  const int root = GENERATE(0, 1);
  const size_t bytes = GENERATE(size_t{0}, size_t{3}, size_t{(3u << 20) + 5});
  std::vector<std::vector<unsigned char>> results(static_cast<size_t>(world));
  RequireNoErrors(RunRanks(world, Options(), [&](RingCommunicator& ring) {
    std::vector<unsigned char> data(bytes, static_cast<unsigned char>(ring.rank()));
    if (ring.rank() == root) {
      for (size_t i = 0; i < bytes; ++i)
        data[i] = static_cast<unsigned char>(i * 31 + 7);
    }
    ring.Broadcast(data.data(), data.size(), root);
    ring.Barrier(5s);
    results[static_cast<size_t>(ring.rank())] = std::move(data);
  }));
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (results[static_cast<size_t>(r)][i] != static_cast<unsigned char>(i * 31 + 7))
        FAIL("rank " << r << " byte " << i);
    }
  }
}

TEST_CASE("ring with one rank is a no-op", "[ring]") {
  auto ring = RingCommunicator::Connect(nullptr, 0, 1, Options());
  std::vector<float> data = {1.5f, 2.5f};
  ring->AllReduceSum(data.data(), data.size());
  ring->Barrier(1s);
  REQUIRE(data == std::vector<float>{1.5f, 2.5f});
}

TEST_CASE("ranks passing different sizes get an error naming the mismatch", "[ring]") {
  auto errors = RunRanks(2, Options(), [&](RingCommunicator& ring) {
    std::vector<float> data(ring.rank() == 0 ? 10 : 11);
    ring.AllReduceSum(data.data(), data.size());
  });
  REQUIRE(errors[0]);
  REQUIRE(errors[1]);
  REQUIRE_THAT(Message(errors[0]), Catch::Contains("rank 1 is in all-reduce(float32) #0 of 11"));
}

TEST_CASE("a peer that closes makes the others fail fast, naming it", "[ring]") {
  const int world = GENERATE(2, 3);
  RingOptions options = Options();
  options.timeout = 30s;  // far above the elapsed bound below: the error must come from EOF
  const auto start = std::chrono::steady_clock::now();
  auto errors = RunRanks(world, options, [&](RingCommunicator& ring) {
    if (ring.rank() == world - 1) {
      ring.Close();  // "dies" before the collective
      return;
    }
    std::vector<float> data(200000, 1.f);
    ring.AllReduceSum(data.data(), data.size());
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(elapsed < 10s);
  REQUIRE_FALSE(errors[static_cast<size_t>(world - 1)]);
  for (int r = 0; r < world - 1; ++r) {
    INFO("rank " << r << ": " << Message(errors[static_cast<size_t>(r)]));
    REQUIRE(errors[static_cast<size_t>(r)]);
    REQUIRE_THROWS_AS(std::rethrow_exception(errors[static_cast<size_t>(r)]), PeerError);
    REQUIRE_THAT(Message(errors[static_cast<size_t>(r)]), Catch::Contains("rank "));
  }
  // Rank 0's predecessor is the closed rank: its message names it.
  REQUIRE_THAT(Message(errors[0]), Catch::Contains("rank " + std::to_string(world - 1)));
}

TEST_CASE("Interrupt fails a collective blocked on another thread at once", "[ring]") {
  // What a communication thread's owner does when it must stop while a sum is in flight.
  RingOptions options = Options();
  options.timeout = 30s;  // far above the bound below: the error must come from Interrupt
  std::atomic<bool> finished{false};
  std::exception_ptr blocked_error;
  std::chrono::steady_clock::duration blocked_for{};
  RequireNoErrors(RunRanks(2, options, [&](RingCommunicator& ring) {
    if (ring.rank() == 1) {  // alive, never joins the collective
      for (int i = 0; i < 1000 && !finished; ++i)
        std::this_thread::sleep_for(10ms);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    std::thread comm([&] {
      try {
        float x = 1;
        ring.AllReduceSum(&x, 1);
      } catch (...) {
        blocked_error = std::current_exception();
      }
      blocked_for = std::chrono::steady_clock::now() - start;
    });
    std::this_thread::sleep_for(200ms);
    ring.Interrupt();
    comm.join();
    finished = true;
  }));
  REQUIRE(blocked_error);
  REQUIRE_THROWS_AS(std::rethrow_exception(blocked_error), PeerError);
  REQUIRE(blocked_for < 5s);
}

TEST_CASE("a peer that stalls produces a timeout error naming it", "[ring]") {
  RingOptions options = Options();
  options.timeout = 300ms;
  auto errors = RunRanks(2, options, [&](RingCommunicator& ring) {
    if (ring.rank() == 1) {
      std::this_thread::sleep_for(1500ms);  // alive but never joins the collective
      return;
    }
    float x = 1;
    ring.AllReduceSum(&x, 1);
  });
  REQUIRE(errors[0]);
  REQUIRE_THAT(Message(errors[0]), Catch::Contains("no data from rank 1"));
}

TEST_CASE("errors name the peer's local rank and host from its description", "[ring]") {
  const auto options_of = [](int rank) {
    RingOptions options = Options();
    options.timeout = 300ms;
    options.description =
        "local rank " + std::to_string(rank % 2) + " on host-" + std::to_string(rank / 2);
    return options;
  };
  auto errors = RunRanks(4, options_of, [&](RingCommunicator& ring) {
    if (ring.rank() == 3) {
      std::this_thread::sleep_for(1500ms);  // alive but never joins the collective
      return;
    }
    float x = 1;
    ring.AllReduceSum(&x, 1);
  });
  REQUIRE(errors[0]);
  // Rank 0 receives from rank 3, the silent one.
  REQUIRE_THAT(Message(errors[0]), Catch::Contains("no data from rank 3 (local rank 1 on host-1)"));
}

TEST_CASE("a rank that never shows up fails the connect with its rank named", "[ring]") {
  MemoryStore store;
  RingOptions options = Options();
  options.timeout = 300ms;
  try {
    RingCommunicator::Connect(&store, 0, 2, options);
    FAIL("connect succeeded without rank 1");
  } catch (const std::exception& e) {
    REQUIRE_THAT(e.what(), Catch::Contains("mrcnn/ring/addr/1"));
  }
}
