// BucketReadiness: buckets launch in bucket order however backward orders the parameters,
// each as soon as it and every earlier bucket are complete; parameters without a
// gradient are completed after backward; a parameter reported twice is an error; the
// trace lists what happened.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "trainer/engine/distributed/bucket_readiness.h"

using mrcnn::engine::dist::BucketReadiness;
using mrcnn::engine::dist::FormatBucketTrace;
using mrcnn::engine::dist::LaunchRange;
using mrcnn::engine::dist::ReadinessEvent;

namespace {

std::vector<size_t> Launched(LaunchRange r) {
  std::vector<size_t> out;
  for (size_t b = r.first; b < r.last; ++b)
    out.push_back(b);
  return out;
}

}  // namespace

TEST_CASE("a complete bucket waits for the buckets before it", "[readiness]") {
  // Parameters 0,1 in bucket 1; 2,3 in bucket 0 (reverse registration order, as laid out).
  BucketReadiness r({1, 1, 0, 0}, 2);
  CHECK(r.MarkReady(0).empty());
  CHECK(r.MarkReady(1).empty());  // bucket 1 complete, bucket 0 not launched yet
  CHECK(r.MarkReady(3).empty());
  CHECK(Launched(r.MarkReady(2)) == std::vector<size_t>{0, 1});
  CHECK(r.all_launched());
}

TEST_CASE("buckets launch one by one when backward follows the layout", "[readiness]") {
  BucketReadiness r({2, 1, 1, 0}, 3);
  CHECK(Launched(r.MarkReady(3)) == std::vector<size_t>{0});
  CHECK(r.MarkReady(2).empty());
  CHECK(Launched(r.MarkReady(1)) == std::vector<size_t>{1});
  CHECK(!r.all_launched());
  CHECK(Launched(r.MarkReady(0)) == std::vector<size_t>{2});
  CHECK(r.all_launched());
}

TEST_CASE("parameters without a gradient are completed after backward", "[readiness]") {
  BucketReadiness r({1, 1, 0, 0}, 2);
  CHECK(r.MarkReady(3).empty());
  CHECK(r.MarkReady(1).empty());
  CHECK(r.Unready() == std::vector<size_t>{0, 2});
  CHECK(Launched(r.MarkRestReady()) == std::vector<size_t>{0, 1});
  CHECK(r.Unready().empty());
  CHECK(r.all_launched());
  // A backward that reached no parameter at all (every bucket launches after it).
  r.Reset();
  CHECK(r.Unready() == std::vector<size_t>{0, 1, 2, 3});
  CHECK(Launched(r.MarkRestReady()) == std::vector<size_t>{0, 1});
}

TEST_CASE("a parameter marked twice in one iteration is an error", "[readiness]") {
  BucketReadiness r({0, 0}, 1);
  r.MarkReady(1);
  CHECK_THROWS_AS(r.MarkReady(1), std::logic_error);
  CHECK_THROWS_AS(r.MarkReady(2), std::out_of_range);
  r.Reset();  // the next iteration starts over
  CHECK(r.MarkReady(1).empty());
  CHECK(Launched(r.MarkReady(0)) == std::vector<size_t>{0});
}

TEST_CASE("layouts with an empty or unknown bucket are rejected", "[readiness]") {
  CHECK_THROWS_AS(BucketReadiness({0, 0}, 2), std::invalid_argument);
  CHECK_THROWS_AS(BucketReadiness({0, 3}, 2), std::invalid_argument);
}

TEST_CASE("any readiness order launches every bucket once, in order, as early as allowed",
          "[readiness]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t buckets = 1 + gen() % 6;
    std::vector<size_t> bucket_of;
    for (size_t b = 0; b < buckets; ++b) {
      for (size_t k = 0, n = 1 + gen() % 4; k < n; ++k)
        bucket_of.push_back(b);
    }
    std::vector<size_t> order(bucket_of.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), gen);
    const size_t reached = gen() % (order.size() + 1);  // the rest get no gradient
    BucketReadiness r(bucket_of, buckets);
    std::vector<size_t> launches, remaining(buckets, 0);
    for (size_t b : bucket_of)
      ++remaining[b];
    size_t expected_next = 0;
    for (size_t i = 0; i < reached; ++i) {
      --remaining[bucket_of[order[i]]];
      // The reference rule: launch every leading complete bucket now.
      std::vector<size_t> expected;
      while (expected_next < buckets && remaining[expected_next] == 0)
        expected.push_back(expected_next++);
      const std::vector<size_t> got = Launched(r.MarkReady(order[i]));
      REQUIRE(got == expected);
      launches.insert(launches.end(), got.begin(), got.end());
    }
    const std::vector<size_t> rest = Launched(r.MarkRestReady());
    launches.insert(launches.end(), rest.begin(), rest.end());
    std::vector<size_t> all(buckets);
    std::iota(all.begin(), all.end(), size_t{0});
    REQUIRE(launches == all);
  }
}

TEST_CASE("the recorded trace lists readiness, the end of backward and launches", "[readiness]") {
  BucketReadiness r({1, 0}, 2);
  r.MarkReady(1);
  CHECK(r.events().empty());  // not recording
  r.Reset(/*record=*/true);
  r.MarkReady(1);
  r.MarkRestReady();
  const std::vector<ReadinessEvent>& e = r.events();
  REQUIRE(e.size() == 5);
  CHECK(FormatBucketTrace({{1}, {0}}, e) ==
        "bucket 0: 1\nbucket 1: 0\nready 1\nlaunch 0\nbackward_end\nready 0\nlaunch 1\n");
}
