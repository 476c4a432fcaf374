// The loop and every hook against a fake step (no model, no LibTorch): hook order,
// checkpoint and evaluation periods including the last iteration, the stop agreement
// between ranks, writer periods and windows, and what a resumed run does.
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "trainer/engine/events/jsonl_writer.h"
#include "trainer/engine/hooks/evaluation.h"
#include "trainer/engine/hooks/iteration_timer.h"
#include "trainer/engine/hooks/lr_scheduler.h"
#include "trainer/engine/hooks/model_export.h"
#include "trainer/engine/hooks/periodic_checkpointer.h"
#include "trainer/engine/hooks/periodic_writer.h"
#include "trainer/engine/hooks/stop_signal.h"
#include "trainer/engine/trainer_base.h"

using namespace mrcnn::engine;

namespace {

// A step that "trains" by putting loss_a = iteration and total_loss = 2 * iteration + rank.
class FakeTrainer : public TrainerBase {
 public:
  explicit FakeTrainer(std::vector<std::string>* calls = nullptr, EventStorage storage = {},
                       int rank = 0)
      : TrainerBase(std::move(storage)), calls_(calls), rank_(rank) {}
  std::vector<int64_t> steps_run;

 protected:
  void RunStep() override {
    steps_run.push_back(iter());
    if (calls_)
      calls_->push_back("step " + std::to_string(iter()));
    storage().PutScalar("loss_a", static_cast<double>(iter()), RankReduce::kMean);
    storage().PutScalar("total_loss", 2.0 * static_cast<double>(iter()) + rank_, RankReduce::kMean);
    storage().PutScalar("data_time", 0.5);
  }

 private:
  std::vector<std::string>* calls_;
  int rank_;
};

class RecordingHook : public HookBase {
 public:
  RecordingHook(std::string name, std::vector<std::string>& calls)
      : name_(std::move(name)), calls_(calls) {}
  void BeforeTrain(TrainerBase&) override { calls_.push_back(name_ + " before_train"); }
  void BeforeStep(TrainerBase& t) override {
    calls_.push_back(name_ + " before_step " + std::to_string(t.iter()));
  }
  void AfterStep(TrainerBase& t) override {
    calls_.push_back(name_ + " after_step " + std::to_string(t.iter()));
  }
  void AfterTrain(TrainerBase&) override { calls_.push_back(name_ + " after_train"); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  std::vector<std::string>& calls_;
};

class FakeSaver : public CheckpointSaver {
 public:
  std::vector<int64_t> saved;
  void Save(int64_t completed) override { saved.push_back(completed); }
};

// Records what PeriodicWriterHook hands it: the window of each training write.
class FakeWriter : public EventWriter {
 public:
  explicit FakeWriter(int64_t start_iter) : last_(start_iter - 1) {}
  struct Window {
    int64_t done;
    double mean_loss;
    double lr;
  };
  std::vector<Window> windows;
  std::vector<EvaluationEvent> evaluations;
  bool closed = false;
  void WriteTraining(const EventStorage& s) override {
    windows.push_back({s.iteration() + 1, *s.History("loss_a").MeanAfter(last_),
                       s.Has("lr") ? s.History("lr").Latest() : -1});
    last_ = s.iteration();
  }
  void WriteEvaluations(const EventStorage& s) override {
    for (size_t i = evaluations.size(); i < s.evaluations().size(); ++i)
      evaluations.push_back(s.evaluations()[i]);
  }
  void Close() override { closed = true; }

 private:
  int64_t last_;
};

template <typename... H>
std::vector<std::unique_ptr<HookBase>> MakeHooks(std::unique_ptr<H>... hooks) {
  std::vector<std::unique_ptr<HookBase>> v;
  (v.push_back(std::move(hooks)), ...);
  return v;
}

}  // namespace

TEST_CASE("the loop runs hooks in registration order around each step", "[hooks]") {
  std::vector<std::string> calls;
  FakeTrainer t(&calls);
  t.RegisterHooks(MakeHooks(std::make_unique<RecordingHook>("A", calls),
                            std::make_unique<RecordingHook>("B", calls)));
  t.Train(3, 5);
  const std::vector<std::string> want = {
      "A before_train",  "B before_train",                                                 //
      "A before_step 3", "B before_step 3", "step 3", "A after_step 3", "B after_step 3",  //
      "A before_step 4", "B before_step 4", "step 4", "A after_step 4", "B after_step 4",  //
      "A after_train",   "B after_train"};
  CHECK(calls == want);
  CHECK(t.iter() == 5);
  CHECK(t.hooks().size() == 2);
  CHECK(t.hooks()[0]->name() == "A");
}

TEST_CASE("a run that starts at max_iter runs no step but before/after_train", "[hooks]") {
  std::vector<std::string> calls;
  FakeTrainer t(&calls);
  t.RegisterHooks(MakeHooks(std::make_unique<RecordingHook>("A", calls)));
  t.Train(10, 10);
  CHECK(calls == std::vector<std::string>{"A before_train", "A after_train"});
}

TEST_CASE("an exception from the step ends the loop without after_train", "[hooks]") {
  class Failing : public TrainerBase {
    void RunStep() override {
      if (iter() == 2)
        throw std::runtime_error("loss became nan");
    }
  } t;
  std::vector<std::string> calls;
  t.RegisterHooks(MakeHooks(std::make_unique<RecordingHook>("A", calls)));
  CHECK_THROWS_WITH(t.Train(0, 5), "loss became nan");
  CHECK(calls.back() == "A before_step 2");
}

TEST_CASE("periodic checkpoints: every period, never twice, the last one at the end",
          "[hooks][checkpoint]") {
  struct Case {
    int64_t start, max, period;
    std::vector<int64_t> saved;
    int barriers;
  };
  const std::vector<Case> cases = {
      {0, 12, 4, {4, 8, 12}, 2},  // 12 is the end's save, not a periodic one
      {0, 10, 4, {4, 8, 10}, 2},  // the end is not on the period
      {7, 12, 4, {8, 12}, 1},     // resumed at 7
      {0, 5, 0, {5}, 0},          // no period: only the end
      {12, 12, 4, {}, 0},         // resumed at the end: nothing trained, nothing saved
      {0, 3, 1, {1, 2, 3}, 2},    // every iteration
  };
  for (const auto& c : cases) {
    CAPTURE(c.start, c.max, c.period);
    FakeSaver saver;
    int barriers = 0;
    FakeTrainer t;
    t.RegisterHooks(MakeHooks(
        std::make_unique<PeriodicCheckpointerHook>(saver, c.period, [&] { ++barriers; })));
    t.Train(c.start, c.max);
    CHECK(saver.saved == c.saved);
    CHECK(barriers == c.barriers);
  }
}

TEST_CASE("evaluation: every period (not at the last iteration), then once at the end",
          "[hooks][eval]") {
  std::vector<int64_t> evaluated;
  int barriers = 0;
  auto evaluate = [&](int64_t done) {
    evaluated.push_back(done);
    return EvaluationOutput{{{done, "bbox", {0.5}, {}}, {done, "segm", {0.25}, {}}},
                            {{done, "val/0", 1, 1, 3, "png"}}};
  };
  FakeTrainer t;
  t.RegisterHooks(MakeHooks(std::make_unique<EvaluationHook>(5, evaluate, [&] { ++barriers; })));
  t.Train(0, 10);
  CHECK(evaluated == std::vector<int64_t>{5, 10});
  CHECK(barriers == 1);  // after the periodic one; the end has the job's final barrier
  REQUIRE(t.storage().evaluations().size() == 4);
  CHECK(t.storage().images().size() == 2);
  CHECK(t.storage().evaluations()[2].iteration == 10);
  CHECK(t.storage().evaluations()[3].iou_type == "segm");

  SECTION("a rank that does not evaluate only waits") {
    FakeTrainer other;
    int other_barriers = 0;
    other.RegisterHooks(MakeHooks(std::make_unique<EvaluationHook>(5, EvaluationHook::Evaluate{},
                                                                   [&] { ++other_barriers; })));
    other.Train(0, 10);
    CHECK(other_barriers == 1);
    CHECK(other.storage().evaluations().empty());
  }
}

TEST_CASE("writer: a window every period, at the last iteration, with the window's mean",
          "[hooks][writer]") {
  auto writer = std::make_unique<FakeWriter>(0);
  FakeWriter* w = writer.get();
  std::vector<std::unique_ptr<EventWriter>> writers;
  writers.push_back(std::move(writer));
  LrSchedule schedule;
  schedule.base_lr = 0.1;
  schedule.warmup_iters = 0;
  schedule.steps = {};
  schedule.max_iter = 12;
  FakeTrainer t;
  t.RegisterHooks(MakeHooks(std::make_unique<LrSchedulerHook>(schedule, [](double) {}),
                            std::make_unique<PeriodicWriterHook>(std::move(writers), 5)));
  t.Train(0, 12);
  REQUIRE(w->windows.size() == 3);
  CHECK(w->windows[0].done == 5);
  CHECK(w->windows[0].mean_loss == Approx(2.0));  // iterations 0..4
  CHECK(w->windows[1].done == 10);
  CHECK(w->windows[1].mean_loss == Approx(7.0));  // 5..9
  CHECK(w->windows[2].done == 12);
  CHECK(w->windows[2].mean_loss == Approx(10.5));  // 10..11
  CHECK(w->windows[2].lr == Approx(0.1));
  CHECK(w->closed);
}

TEST_CASE("a resumed run continues: first step, lr, windows and saves from the resume point",
          "[hooks][resume]") {
  std::vector<double> lrs;
  LrSchedule schedule;
  schedule.base_lr = 1.0;
  schedule.steps = {8};
  schedule.gamma = 0.1;
  schedule.warmup_iters = 0;
  schedule.max_iter = 12;
  FakeSaver saver;
  auto writer = std::make_unique<FakeWriter>(7);
  FakeWriter* w = writer.get();
  std::vector<std::unique_ptr<EventWriter>> writers;
  writers.push_back(std::move(writer));
  FakeTrainer t;
  t.RegisterHooks(
      MakeHooks(std::make_unique<LrSchedulerHook>(schedule, [&](double lr) { lrs.push_back(lr); }),
                std::make_unique<PeriodicCheckpointerHook>(saver, 4, std::function<void()>{}),
                std::make_unique<PeriodicWriterHook>(std::move(writers), 5)));
  t.Train(7, 12);
  CHECK(t.steps_run == std::vector<int64_t>{7, 8, 9, 10, 11});
  CHECK(lrs.size() == 5);
  CHECK(lrs[0] == Approx(1.0));  // iteration 7, before the step at 8
  CHECK(lrs[1] == Approx(0.1));
  CHECK(saver.saved == std::vector<int64_t>{8, 12});
  REQUIRE(w->windows.size() == 3);
  CHECK(w->windows[0].done == 8);                 // the checkpoint's: a later kill loses nothing
  CHECK(w->windows[0].mean_loss == Approx(7.0));  // only this run's iterations
  CHECK(w->windows[1].done == 10);
  CHECK(w->windows[1].mean_loss == Approx(8.5));
  CHECK(w->windows[2].done == 12);
}

TEST_CASE("stop: the requested iteration is saved once, logged, and nothing runs after it",
          "[hooks][stop]") {
  FakeSaver saver;
  int barriers = 0;
  bool requested = false;
  std::vector<int64_t> evaluated;
  bool exported = false;
  auto writer = std::make_unique<FakeWriter>(0);
  FakeWriter* w = writer.get();
  std::vector<std::unique_ptr<EventWriter>> writers;
  writers.push_back(std::move(writer));
  class Stepper : public FakeTrainer {
   public:
    explicit Stepper(bool& r) : requested_(r) {}
    void RunStep() override {
      FakeTrainer::RunStep();
      if (iter() == 5)  // a SIGTERM arriving during the step of iteration 5
        requested_ = true;
    }
    bool& requested_;
  } t(requested);
  auto checkpointer = std::make_unique<PeriodicCheckpointerHook>(saver, 3, [&] { ++barriers; });
  auto stop =
      std::make_unique<StopSignalHook>(*checkpointer, ConsoleLog(false), [&] { return requested; });
  t.RegisterHooks(MakeHooks(
      std::move(checkpointer), std::move(stop),
      std::make_unique<EvaluationHook>(
          2,
          [&](int64_t d) {
            evaluated.push_back(d);
            return EvaluationOutput{};
          },
          std::function<void()>{}),
      std::make_unique<PeriodicWriterHook>(std::move(writers), 4),
      std::make_unique<ModelExportHook>([&] { exported = true; }, std::function<void()>{})));
  t.Train(0, 20);
  CHECK(t.stopping());
  CHECK(t.steps_run.back() == 5);
  CHECK(saver.saved == std::vector<int64_t>{3, 6});  // periodic 3, then the stop at 6
  CHECK(barriers == 2);
  CHECK(evaluated == std::vector<int64_t>{2, 4});  // not at 6 (stopping), not at the end
  CHECK_FALSE(exported);
  REQUIRE(w->windows.size() == 3);
  CHECK(w->windows[0].done == 3);  // at the periodic checkpoint, then the period (4)
  CHECK(w->windows[1].done == 4);
  CHECK(w->windows[2].done == 6);  // the partial window up to the stop is written
  CHECK(w->windows[2].mean_loss == Approx(4.5));

  SECTION("a stop at a periodic checkpoint saves it once") {
    FakeSaver s2;
    bool r2 = false;
    class At2 : public FakeTrainer {
     public:
      explicit At2(bool& r) : r_(r) {}
      void RunStep() override {
        FakeTrainer::RunStep();
        r_ = iter() == 2;
      }
      bool& r_;
    } t2(r2);
    auto c2 = std::make_unique<PeriodicCheckpointerHook>(s2, 3, std::function<void()>{});
    auto st2 = std::make_unique<StopSignalHook>(*c2, ConsoleLog(false), [&] { return r2; });
    t2.RegisterHooks(MakeHooks(std::move(c2), std::move(st2)));
    t2.Train(0, 10);
    CHECK(s2.saved == std::vector<int64_t>{3});
  }
}

namespace {

// An in-process collective for `ranks` threads: element-wise sum through shared memory.
class ThreadSum {
 public:
  explicit ThreadSum(int ranks) : sync_(ranks), slots_(static_cast<size_t>(ranks)) {}
  void Sum(int rank, std::vector<double>& v) {
    slots_[static_cast<size_t>(rank)] = v;
    sync_.arrive_and_wait();
    std::vector<double> total(v.size(), 0.0);
    for (const auto& s : slots_) {
      if (s.size() != v.size())
        throw std::logic_error("ranks summed vectors of different sizes");
      for (size_t i = 0; i < v.size(); ++i)
        total[i] += s[i];
    }
    sync_.arrive_and_wait();
    v = total;
  }

 private:
  std::barrier<> sync_;
  std::vector<std::vector<double>> slots_;
};

}  // namespace

TEST_CASE("two ranks agree on the stop iteration and on the mean losses", "[hooks][stop][ranks]") {
  ThreadSum collective(2);
  struct Rank {
    FakeSaver saver;
    std::vector<int64_t> steps;
    std::vector<double> total_loss;
  } ranks[2];
  std::atomic<bool> signal_rank1{false};
  auto run = [&](int r) {
    class Signalling : public FakeTrainer {
     public:
      Signalling(EventStorage s, int rank, std::atomic<bool>& flag)
          : FakeTrainer(nullptr, std::move(s), rank), rank_(rank), flag_(flag) {}
      void RunStep() override {
        FakeTrainer::RunStep();
        if (rank_ == 1 && iter() == 4)
          flag_ = true;  // only rank 1 gets the signal
      }
      int rank_;
      std::atomic<bool>& flag_;
    } t(EventStorage(2, [&, r](std::vector<double>& v) { collective.Sum(r, v); }), r, signal_rank1);
    auto checkpointer =
        std::make_unique<PeriodicCheckpointerHook>(ranks[r].saver, 0, std::function<void()>{});
    auto stop = std::make_unique<StopSignalHook>(*checkpointer, ConsoleLog(false),
                                                 [&, r] { return r == 1 && signal_rank1.load(); });
    t.RegisterHooks(MakeHooks(std::move(checkpointer), std::move(stop)));
    t.Train(0, 50);
    ranks[r].steps = t.steps_run;
    for (const auto& [it, v] : t.storage().History("total_loss").values())
      ranks[r].total_loss.push_back(v);
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  for (auto& r : ranks) {
    CHECK(r.steps.back() == 4);
    CHECK(r.saver.saved == std::vector<int64_t>{5});
    REQUIRE(r.total_loss.size() == 5);
    CHECK(r.total_loss[3] == Approx(6.5));  // (2*3+0 + 2*3+1) / 2
  }
}

TEST_CASE("iteration timer: step time and ETA from this run's average", "[hooks][timer]") {
  using namespace std::chrono;
  steady_clock::time_point now{};
  FakeTrainer t;
  class Advancing : public HookBase {  // each step takes 2 s on the fake clock
   public:
    explicit Advancing(steady_clock::time_point& n) : n_(n) {}
    void AfterStep(TrainerBase&) override {}
    void BeforeStep(TrainerBase&) override { n_ += seconds(2); }
    std::string name() const override { return "Advancing"; }
    steady_clock::time_point& n_;
  };
  t.RegisterHooks(
      MakeHooks(std::make_unique<IterationTimerHook>(ConsoleLog(false), [&] { return now; }),
                std::make_unique<Advancing>(now)));
  t.Train(10, 14);
  const auto& time = t.storage().History("time");
  CHECK(time.Latest() == Approx(2.0));
  // After 4 of the run's iterations at 2 s each, with 0 left.
  CHECK(t.storage().History("eta_seconds").Latest() == Approx(0.0));
  CHECK(t.storage().History("eta_seconds").values().front().second == Approx(2.0 * 3));
}

TEST_CASE("metrics.jsonl: one record per window and per evaluation, appended", "[hooks][writer]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mrcnn_hooks_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto file = dir / "metrics.jsonl";
  for (int run = 0; run < 2; ++run) {  // a resumed job appends
    std::vector<std::unique_ptr<EventWriter>> writers;
    writers.push_back(std::make_unique<JsonlWriter>(file, TrainWindowSpec{6, 4}, run * 3));
    FakeTrainer t;
    t.RegisterHooks(MakeHooks(std::make_unique<EvaluationHook>(
                                  0,
                                  [](int64_t d) {
                                    return EvaluationOutput{{{d, "bbox", {0.5, 0.75}, {}}}, {}};
                                  },
                                  std::function<void()>{}),
                              std::make_unique<PeriodicWriterHook>(std::move(writers), 3)));
    t.Train(run * 3, run == 0 ? 3 : 6);
  }
  std::ifstream in(file);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);)
    records.push_back(nlohmann::json::parse(line));
  REQUIRE(records.size() == 4);
  CHECK(records[0]["iteration"] == 3);
  CHECK(records[0]["loss_a"].get<double>() == Approx(1.0));
  CHECK(records[0]["data_time"].get<double>() == Approx(0.5));
  CHECK(records[1]["bbox/AP50"].get<double>() == Approx(0.75));
  CHECK(records[2]["iteration"] == 6);
  CHECK(records[2]["loss_a"].get<double>() == Approx(4.0));
  std::filesystem::remove_all(dir);
}
