// HostedModels (the multi-model endpoint's table) on the deterministic statistics predictor:
// load, duplicate, unknown, unload; LRU eviction under a memory budget; a model larger than
// the budget; unloading waits for in-flight requests.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "serving/models/hosted_models.h"
#include "serving/models/image_statistics_predictor.h"
#include "serving/models/memory_limit.h"

using namespace mrcnn::serving;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

class HostedModelsScratch {
 public:
  HostedModelsScratch() {
    std::string pattern = (fs::temp_directory_path() / "hosted-models-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~HostedModelsScratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A model dir for the statistics predictor whose predictor.json makes its footprint
// `bytes` (padding) and its behaviour `extra`.
fs::path StatisticsModelDir(const fs::path& root, const std::string& name, size_t bytes = 1000,
                            nlohmann::json extra = nlohmann::json::object()) {
  const fs::path dir = root / name;
  fs::create_directories(dir);
  std::ofstream(dir / "statistics_predictor.json") << extra.dump();
  std::ofstream(dir / "padding.bin") << std::string(bytes, 'x');
  return dir;
}

HostedModelsOptions StatisticsModelsOptions(uint64_t budget,
                                            std::vector<std::string>* log = nullptr,
                                            std::mutex* log_mutex = nullptr) {
  HostedModelsOptions o;
  o.memory_budget_bytes = budget;
  o.make_executor = [](const fs::path& dir, std::function<void(std::exception_ptr)> on_loaded) {
    return std::make_shared<InferenceExecutor>(
        [dir]() -> std::unique_ptr<Predictor> {
          return std::make_unique<ImageStatisticsPredictor>(
              ReadImageStatisticsConfig(dir / "statistics_predictor.json"));
        },
        BatchingPolicy{}, std::move(on_loaded));
  };
  o.footprint = [](const fs::path& dir) { return ModelFootprint(dir, 1, 0); };
  if (log != nullptr) {
    o.log = [log, log_mutex](const std::string& line) {
      std::lock_guard lock(*log_mutex);
      log->push_back(line);
    };
  }
  return o;
}

// One image through a leased model; its detection count (the statistics predictor finds
// one object per bright quadrant).
size_t InvokeOneImage(HostedModels& models, const std::string& name) {
  auto lease = models.Acquire(name);
  REQUIRE(lease);
  RgbImage image{8, 8, std::vector<uint8_t>(8 * 8 * 3, 0)};
  image.pixels[0] = 255;  // one bright pixel in the top-left quadrant
  std::promise<InferenceOutcome> done;
  InferenceJob job;
  job.images.push_back(std::move(image));
  job.done = [&done](InferenceOutcome&& outcome) { done.set_value(std::move(outcome)); };
  REQUIRE(lease.executor().TrySubmit(std::move(job)) == InferenceExecutor::SubmitResult::kAccepted);
  const InferenceOutcome outcome = done.get_future().get();
  REQUIRE(outcome.status == InferenceOutcome::Status::kOk);
  return outcome.results.at(0).detections.size();
}

}  // namespace

TEST_CASE("HostedModels: load, duplicate, invoke, list, unload, unknown") {
  HostedModelsScratch root;
  HostedModels models(StatisticsModelsOptions(0));
  const auto a = models.Load("a", StatisticsModelDir(root.path(), "a"));
  CHECK(a.status == HostedModels::LoadStatus::kLoaded);
  CHECK(a.evicted.empty());
  const auto again = models.Load("a", StatisticsModelDir(root.path(), "a2"));
  CHECK(again.status == HostedModels::LoadStatus::kAlreadyLoaded);
  CHECK(again.detail.find("already loaded") != std::string::npos);
  CHECK(models.Load("b", StatisticsModelDir(root.path(), "b")).status ==
        HostedModels::LoadStatus::kLoaded);
  CHECK(InvokeOneImage(models, "a") == 1);
  CHECK_FALSE(models.Acquire("nope"));
  const auto list = models.List();
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "a");
  CHECK(list[0].url == (root.path() / "a").string());
  CHECK(list[1].name == "b");
  CHECK(models.Find("b").has_value());
  CHECK(models.Unload("a"));
  CHECK_FALSE(models.Acquire("a"));
  CHECK_FALSE(models.Find("a").has_value());
  CHECK_FALSE(models.Unload("a"));
  CHECK(models.List().size() == 1);
  // Loadable again once unloaded.
  CHECK(models.Load("a", root.path() / "a").status == HostedModels::LoadStatus::kLoaded);
}

TEST_CASE("HostedModels: a missing dir is not found, a model that fails to load is bad") {
  HostedModelsScratch root;
  HostedModels models(StatisticsModelsOptions(10'000));
  const auto missing = models.Load("m", root.path() / "nowhere");
  CHECK(missing.status == HostedModels::LoadStatus::kNotFound);
  CHECK(missing.detail.find("nowhere") != std::string::npos);
  const auto bad =
      models.Load("bad", StatisticsModelDir(root.path(), "bad", 100, {{"fail_load", true}}));
  CHECK(bad.status == HostedModels::LoadStatus::kBadModel);
  CHECK(bad.detail.find("failed to load") != std::string::npos);
  CHECK(models.charged_bytes() == 0);  // nothing stays charged for it
  CHECK_FALSE(models.Acquire("bad"));
  CHECK(models.List().empty());
}

TEST_CASE("HostedModels: 5 models under a budget for 2, round robin: LRU evictions, no errors") {
  HostedModelsScratch root;
  std::vector<std::string> log;
  std::mutex log_mutex;
  // Each model's footprint is its two files: padding 1000 bytes + "{}".
  const uint64_t each = 1002;
  HostedModels models(StatisticsModelsOptions(2 * each + each / 2, &log, &log_mutex));
  std::vector<std::string> evictions;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      const std::string name = fmt::format("m{}", i);
      if (!models.Acquire(name)) {
        const auto result = models.Load(name, StatisticsModelDir(root.path(), name));
        REQUIRE(result.status == HostedModels::LoadStatus::kLoaded);
        evictions.insert(evictions.end(), result.evicted.begin(), result.evicted.end());
      }
      CHECK(InvokeOneImage(models, name) == 1);
      CHECK(models.charged_bytes() <= models.memory_budget_bytes());
      CHECK(models.List().size() <= 2);
    }
  }
  // Round robin over 5 with room for 2: every load after the second evicts the model used
  // longest ago, which is always the one loaded two steps earlier.
  REQUIRE(evictions.size() == 13);
  CHECK(evictions[0] == "m0");
  CHECK(evictions[1] == "m1");
  CHECK(evictions[2] == "m2");
  CHECK(evictions[3] == "m3");
  CHECK(evictions[4] == "m4");
  std::lock_guard lock(log_mutex);
  CHECK(std::count_if(log.begin(), log.end(), [](const std::string& line) {
          return line.find("least recently used; evicted to make room for") != std::string::npos;
        }) == 13);
}

TEST_CASE("HostedModels: LRU follows use, not load order") {
  HostedModelsScratch root;
  HostedModels models(StatisticsModelsOptions(2 * 1002 + 10));
  REQUIRE(models.Load("a", StatisticsModelDir(root.path(), "a")).status ==
          HostedModels::LoadStatus::kLoaded);
  REQUIRE(models.Load("b", StatisticsModelDir(root.path(), "b")).status ==
          HostedModels::LoadStatus::kLoaded);
  CHECK(InvokeOneImage(models, "a") == 1);  // a is now the more recently used
  const auto c = models.Load("c", StatisticsModelDir(root.path(), "c"));
  REQUIRE(c.status == HostedModels::LoadStatus::kLoaded);
  CHECK(c.evicted == std::vector<std::string>{"b"});
  CHECK(models.Find("a").has_value());
}

TEST_CASE("HostedModels: a model larger than the whole budget is refused and evicts nothing") {
  HostedModelsScratch root;
  HostedModels models(StatisticsModelsOptions(3000));
  REQUIRE(models.Load("small", StatisticsModelDir(root.path(), "small")).status ==
          HostedModels::LoadStatus::kLoaded);
  const auto big = models.Load("big", StatisticsModelDir(root.path(), "big", 5000));
  CHECK(big.status == HostedModels::LoadStatus::kInsufficientMemory);
  CHECK(big.detail.find("more than the whole memory budget") != std::string::npos);
  CHECK(big.evicted.empty());
  CHECK(models.Find("small").has_value());
}

TEST_CASE("HostedModels: unloading waits for the model's in-flight requests") {
  HostedModelsScratch root;
  HostedModels models(StatisticsModelsOptions(0));
  REQUIRE(models.Load("a", StatisticsModelDir(root.path(), "a")).status ==
          HostedModels::LoadStatus::kLoaded);
  auto lease = models.Acquire("a");
  REQUIRE(lease);
  std::atomic<bool> unloaded{false};
  std::thread unloader([&] {
    CHECK(models.Unload("a"));
    unloaded = true;
  });
  // New requests no longer find it...
  for (int i = 0; i < 100 && models.Acquire("a"); ++i)
    std::this_thread::sleep_for(1ms);
  CHECK_FALSE(models.Acquire("a"));
  // ...but the one in flight still runs on a live executor, and the unload waits for it.
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(unloaded.load());
  CHECK(lease.executor().Ready());
  lease = HostedModels::Lease();
  unloader.join();
  CHECK(unloaded.load());
}

TEST_CASE("ModelFootprint: weights per worker plus a workspace per worker") {
  HostedModelsScratch root;
  const auto dir = StatisticsModelDir(root.path(), "m", 4000);
  CHECK(ModelFootprint(dir, 1, 0) == 4002);
  CHECK(ModelFootprint(dir, 3, 100) == 3 * 4102);
}

TEST_CASE("ReadMemoryLimit: the container's limit, else the machine's RAM") {
  HostedModelsScratch root;
  const MemoryLimit unlimited = ReadMemoryLimit(root.path());  // no cgroup files at all
  CHECK(unlimited.source == "physical memory");
  CHECK(unlimited.bytes > (64u << 20));
  fs::create_directories(root.path() / "memory");
  // cgroup v1 without a limit: a huge number.
  std::ofstream(root.path() / "memory" / "memory.limit_in_bytes") << "9223372036854771712\n";
  CHECK(ReadMemoryLimit(root.path()).source == "physical memory");
  std::ofstream(root.path() / "memory" / "memory.limit_in_bytes") << (6ull << 30) << "\n";
  CHECK(ReadMemoryLimit(root.path()).bytes == (6ull << 30));
  CHECK(ReadMemoryLimit(root.path()).source == "cgroup v1 memory.limit_in_bytes");
  // cgroup v2 wins; "max" there means no limit, so v1's is used.
  std::ofstream(root.path() / "memory.max") << "max\n";
  CHECK(ReadMemoryLimit(root.path()).source == "cgroup v1 memory.limit_in_bytes");
  std::ofstream(root.path() / "memory.max") << (3ull << 30) << "\n";
  CHECK(ReadMemoryLimit(root.path()).bytes == (3ull << 30));
  CHECK(ReadMemoryLimit(root.path()).source == "cgroup v2 memory.max");
}
