// The event store: histories, window means, medians, and the cross-rank sync of means and
// votes (one collective per iteration, values in name order).
#include <catch2/catch.hpp>
#include <vector>

#include "trainer/engine/events/event_storage.h"
#include "trainer/engine/events/train_window.h"

using namespace mrcnn::engine;

TEST_CASE("history: latest, mean after an iteration, median of a window, bounded length",
          "[events]") {
  ScalarHistory h(4);
  CHECK_THROWS(h.Latest());
  CHECK_FALSE(h.MeanAfter(-1).has_value());
  for (int i = 0; i < 6; ++i)
    h.Put(i, static_cast<double>(i * i));
  CHECK(h.values().size() == 4);  // 2..5 kept
  CHECK(h.Latest() == 25);
  CHECK(h.LatestIteration() == 5);
  CHECK(*h.MeanAfter(3) == Approx((16.0 + 25.0) / 2));
  CHECK_FALSE(h.MeanAfter(5).has_value());
  CHECK(h.Median(3) == 16);
  CHECK(h.Median(2) == Approx(20.5));
}

TEST_CASE("one process: SyncRanks keeps values and evaluates votes", "[events]") {
  EventStorage s;
  bool vote = false;
  s.AddRankVote("stop", [&] { return vote; });
  s.set_iteration(0);
  s.PutScalar("loss_x", 1.5, RankReduce::kMean);
  s.SyncRanks();
  CHECK(s.History("loss_x").Latest() == 1.5);
  CHECK(s.History("stop").Latest() == 0);
  vote = true;
  s.set_iteration(1);
  s.SyncRanks();
  CHECK(s.History("stop").Latest() == 1);
  CHECK(s.History("stop").LatestIteration() == 1);
  CHECK_THROWS_WITH(s.History("nope"), Catch::Contains("\"nope\""));
}

TEST_CASE("several ranks: one collective with the means in name order, then the votes",
          "[events]") {
  std::vector<std::vector<double>> sent;
  // The other rank contributes 3 to every mean and votes yes.
  EventStorage s(2, [&](std::vector<double>& v) {
    sent.push_back(v);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] += i + 1 < v.size() ? 3.0 : 1.0;
  });
  s.AddRankVote("stop_requested", [] { return false; });
  s.set_iteration(7);
  s.PutScalar("total_loss", 5.0, RankReduce::kMean);
  s.PutScalar("loss_b", 1.0, RankReduce::kMean);
  s.PutScalar("data_time", 0.25);  // local: not sent
  s.SyncRanks();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0] == std::vector<double>{1.0, 5.0, 0.0});
  CHECK(s.History("loss_b").Latest() == 2.0);
  CHECK(s.History("total_loss").Latest() == 4.0);
  CHECK(s.History("data_time").Latest() == 0.25);
  CHECK(s.History("stop_requested").Latest() == 1.0);
  s.set_iteration(8);
  s.SyncRanks();  // nothing pending: the vote alone
  CHECK(sent.back().size() == 1);
}

TEST_CASE("several ranks need a collective", "[events]") {
  CHECK_THROWS(EventStorage(2, {}));
  CHECK_THROWS(EventStorage(0, {}));
}

TEST_CASE("the log window: means over the window, newest lr/eta/memory, images per second",
          "[events]") {
  EventStorage s;
  for (int i = 0; i < 4; ++i) {
    s.set_iteration(i);
    s.PutScalar("loss_cls", i);
    s.PutScalar("total_loss", 2 * i);
    s.PutScalar("time", 0.5 * (i + 1));
    s.PutScalar("data_time", 0.1);
    s.PutScalar("lr", 0.01 * i);
    s.PutScalar("eta_seconds", 100 - i);
    s.PutScalar("max_mem_mb", 10 * i);
  }
  const TrainLogEntry e = TrainWindowEntry(s, 1, {10, 8});
  CHECK(e.iteration == 4);
  CHECK(e.max_iter == 10);
  CHECK(e.losses.at("loss_cls") == Approx(2.5));
  CHECK(e.total_loss == Approx(5.0));
  CHECK(e.iter_time == Approx(1.75));
  CHECK(e.data_time == Approx(0.1));
  CHECK(e.images_per_sec == Approx(8 / 1.75));
  CHECK(e.lr == Approx(0.03));
  CHECK(e.eta_seconds == 97);
  CHECK(e.max_mem_mb == 30);
  CHECK(e.losses.count("total_loss") == 0);
}
