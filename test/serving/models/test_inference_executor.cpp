#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serving/codec/response_encoding.h"
#include "serving/models/detection_filter.h"
#include "serving/models/image_statistics_predictor.h"
#include "serving/models/inference_executor.h"
#include "trainer/data/mask_rle.h"

using namespace mrcnn::serving;
using namespace std::chrono_literals;

namespace {

RgbImage Canvas(int64_t width, int64_t height) {
  return RgbImage{height, width, std::vector<uint8_t>(static_cast<size_t>(width * height * 3), 0)};
}

void FillRect(RgbImage& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, uint8_t r, uint8_t g,
              uint8_t b) {
  for (int64_t y = y0; y < y1; ++y) {
    for (int64_t x = x0; x < x1; ++x) {
      uint8_t* p = &image.pixels[static_cast<size_t>((y * image.width + x) * 3)];
      p[0] = r, p[1] = g, p[2] = b;
    }
  }
}

// Records batch sizes; sleeps per call so that requests pile up behind a running batch.
class RecordingPredictor final : public Predictor {
 public:
  RecordingPredictor(std::vector<int>& sizes, std::mutex& mutex, std::chrono::milliseconds delay)
      : sizes_(sizes), mutex_(mutex), delay_(delay) {}
  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions& options) override {
    {
      std::lock_guard lock(mutex_);
      sizes_.push_back(static_cast<int>(images.size()));
      options_.push_back(options);
    }
    std::this_thread::sleep_for(delay_);
    std::vector<ImageDetections> out;
    for (const auto& image : images) {
      ImageDetections result{image.height, image.width, {}};
      // Scores 0.9, 0.8, ... 0.1: lets tests check per-request filtering.
      for (int i = 9; i >= 1; --i) {
        Detection d;
        d.score = static_cast<float>(i) / 10.0f;
        d.box = {0, 0, 1, 1};
        d.label = "thing";
        d.category_id = i;
        if (options.masks) {
          d.mask.assign(static_cast<size_t>(image.height * image.width), 1);
        }
        result.detections.push_back(std::move(d));
      }
      out.push_back(std::move(result));
    }
    return out;
  }
  std::string Describe() const override { return "recording"; }
  std::vector<PredictOptions> options_;

 private:
  std::vector<int>& sizes_;
  std::mutex& mutex_;
  std::chrono::milliseconds delay_;
};

std::future<InferenceOutcome> Submit(
    InferenceExecutor& executor, std::vector<RgbImage> images, PredictOptions options,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
  auto promise = std::make_shared<std::promise<InferenceOutcome>>();
  auto future = promise->get_future();
  InferenceJob job;
  job.images = std::move(images);
  job.options = options;
  job.deadline = deadline;
  job.done = [promise](InferenceOutcome&& outcome) { promise->set_value(std::move(outcome)); };
  REQUIRE(executor.TrySubmit(std::move(job)) == InferenceExecutor::SubmitResult::kAccepted);
  return future;
}

void WaitReady(InferenceExecutor& executor) {
  for (int i = 0; i < 500 && !executor.Ready(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(executor.Ready());
}

}  // namespace

TEST_CASE("the statistics predictor finds bright regions per grid cell", "[serving][predictor]") {
  ImageStatisticsPredictor predictor(ImageStatisticsConfig{});
  RgbImage image = Canvas(64, 48);
  FillRect(image, 10, 5, 30, 20, 0, 255, 0);   // top-left cell, green
  FillRect(image, 40, 30, 50, 40, 255, 0, 0);  // bottom-right cell, red, darker luminance
  const RgbImageView view{image.pixels.data(), image.height, image.width};
  const auto results = predictor.Predict(std::span(&view, 1), PredictOptions{});
  REQUIRE(results.size() == 1);
  const auto& detections = results[0].detections;
  REQUIRE(detections.size() == 2);
  CHECK(detections[0].label == "green");
  CHECK(detections[0].category_id == 2);
  CHECK(detections[0].box == std::array<float, 4>{10, 5, 30, 20});
  CHECK(detections[0].score == Approx(149.0 / 255.0));  // Y of pure green = 587*255/1000
  CHECK(detections[1].label == "red");
  CHECK(detections[1].box == std::array<float, 4>{40, 30, 50, 40});
  size_t ones = 0;
  for (uint8_t v : detections[0].mask) {
    ones += v;
  }
  CHECK(ones == 20 * 15);
  CHECK(detections[0].mask[5 * 64 + 10] == 1);
  CHECK(detections[0].mask[5 * 64 + 9] == 0);

  PredictOptions strict;
  strict.score_threshold = 0.5f;  // green 0.584 stays, red 0.298 goes
  strict.masks = false;
  const auto filtered = predictor.Predict(std::span(&view, 1), strict);
  REQUIRE(filtered[0].detections.size() == 1);
  CHECK(filtered[0].detections[0].mask.empty());
}

TEST_CASE("filtering and JSON encoding of detections", "[serving][response]") {
  ImageDetections image{2, 3, {}};
  for (float score : {0.9f, 0.6f, 0.3f}) {
    Detection d;
    d.score = score;
    d.box = {0.5f, 1.0f, 2.0f, 2.0f};
    d.label = "cat";
    d.category_id = 17;
    d.mask = {0, 1, 1, 0, 1, 0};  // row-major 2x3
    image.detections.push_back(d);
  }
  PredictOptions options;
  options.score_threshold = 0.3f;  // strictly above: 0.3 goes
  options.max_detections = 1;
  CHECK(FilterDetections(image, options).detections.size() == 1);
  options.max_detections = 10;
  CHECK(FilterDetections(image, options).detections.size() == 2);
  // A tiled request's result was capped by the predictor (max_detections is per tile there).
  options.max_detections = 1;
  options.tile_size = 128;
  CHECK(FilterDetections(image, options).detections.size() == 2);
  options.tile_size = 0;

  const auto body = nlohmann::json::parse(EncodeDetectionsJson({image}, false, true));
  CHECK(body["height"] == 2);
  CHECK(body["width"] == 3);
  REQUIRE(body["detections"].size() == 3);
  const auto& first = body["detections"][0];
  CHECK(first["label"] == "cat");
  CHECK(first["category_id"] == 17);
  CHECK(first["box"][0].get<float>() == 0.5f);
  CHECK(first["mask"]["size"] == nlohmann::json::array({2, 3}));
  // Column-major runs of [[0,1,1],[1,0,0]]: 0, 1, 1, 0, 1, 0 -> runs 1,2,1,1,1.
  const auto rle = mrcnn::data::RleFromString(first["mask"]["counts"].get<std::string>(), 2, 3);
  CHECK(mrcnn::data::DecodeMask(rle) == image.detections[0].mask);

  const auto list = nlohmann::json::parse(EncodeDetectionsJson({image, image}, true, false));
  REQUIRE(list["predictions"].size() == 2);
  CHECK_FALSE(list["predictions"][1]["detections"][0].contains("mask"));
  CHECK_FALSE(first.contains("keypoints"));  // only keypoint models answer keypoints

  ImageDetections posed = image;
  posed.detections[1].keypoints = {{1.5f, 0.25f, 0.875f}, {2.0f, 1.0f, 0.5f}};
  const auto with_points = nlohmann::json::parse(EncodeDetectionsJson({posed}, false, false));
  CHECK(with_points["detections"][1]["keypoints"] ==
        nlohmann::json::parse("[[1.5, 0.25, 0.875], [2.0, 1.0, 0.5]]"));
  CHECK_FALSE(with_points["detections"][0].contains("keypoints"));

  image.detections[0].mask.clear();  // a predictor that ignored masks=true is our bug
  CHECK_THROWS_AS(EncodeDetectionsJson({image}, false, true), std::runtime_error);
}

TEST_CASE("the executor batches requests that arrive together", "[serving][executor]") {
  std::vector<int> sizes;
  std::mutex mutex;
  RecordingPredictor* recorder = nullptr;
  InferenceExecutor executor(
      [&]() {
        auto predictor = std::make_unique<RecordingPredictor>(sizes, mutex, 100ms);
        recorder = predictor.get();
        return predictor;
      },
      BatchingPolicy{4, std::chrono::milliseconds(50), 64}, [](std::exception_ptr) {});
  WaitReady(executor);

  // The first request runs alone (nothing else within 50 ms); the 9 that queue up behind it
  // run as batches of at most 4 images.
  std::vector<std::future<InferenceOutcome>> futures;
  PredictOptions loose;
  loose.score_threshold = 0.05f;
  futures.push_back(Submit(executor, {Canvas(4, 4)}, loose));
  std::this_thread::sleep_for(60ms);
  for (int i = 0; i < 9; ++i) {
    PredictOptions options;
    options.score_threshold = 0.05f + 0.1f * static_cast<float>(i % 3);
    options.max_detections = 2 + i;
    options.masks = i % 2 == 0;
    futures.push_back(Submit(executor, {Canvas(4, 4)}, options));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    InferenceOutcome outcome = futures[i].get();
    REQUIRE(outcome.status == InferenceOutcome::Status::kOk);
    REQUIRE(outcome.results.size() == 1);
    if (i > 0) {
      const int k = static_cast<int>(i) - 1;
      const float threshold = 0.05f + 0.1f * static_cast<float>(k % 3);
      // Each request got its own options applied to the batch's loosest run.
      size_t expected = 0;
      for (int s = 9; s >= 1; --s) {
        expected += static_cast<float>(s) / 10.0f > threshold ? 1 : 0;
      }
      expected = std::min<size_t>(expected, static_cast<size_t>(2 + k));
      CHECK(outcome.results[0].detections.size() == expected);
      CHECK(outcome.results[0].detections[0].mask.empty() == (k % 2 != 0));
      CHECK(outcome.batch_images >= 1);
      CHECK(outcome.batch_images <= 4);
    }
  }
  std::lock_guard lock(mutex);
  REQUIRE(sizes.size() >= 3);
  CHECK(sizes[0] == 1);
  CHECK(std::vector<int>(sizes.begin() + 1, sizes.end()) == std::vector<int>{4, 4, 1});
  CHECK(recorder->options_[1].masks);  // a batch with any masks=rle request runs masks
}

TEST_CASE("tiled requests share a model call only with equal options", "[serving][executor]") {
  std::vector<int> sizes;
  std::mutex mutex;
  RecordingPredictor* recorder = nullptr;
  InferenceExecutor executor(
      [&]() {
        auto predictor = std::make_unique<RecordingPredictor>(sizes, mutex, 100ms);
        recorder = predictor.get();
        return predictor;
      },
      BatchingPolicy{8, std::chrono::milliseconds(50), 64}, [](std::exception_ptr) {});
  WaitReady(executor);
  // One request occupies the worker; the rest queue up behind it and would all fit one batch.
  std::vector<std::future<InferenceOutcome>> futures;
  futures.push_back(Submit(executor, {Canvas(4, 4)}, PredictOptions{}));
  std::this_thread::sleep_for(60ms);
  PredictOptions tiled;
  tiled.tile_size = 2;
  PredictOptions stricter = tiled;
  stricter.score_threshold = 0.5f;
  PredictOptions untiled_strict;
  untiled_strict.score_threshold = 0.5f;
  for (const PredictOptions& options : {tiled, tiled, stricter, untiled_strict, PredictOptions{}}) {
    futures.push_back(Submit(executor, {Canvas(4, 4)}, options));
  }
  for (auto& f : futures) {
    REQUIRE(f.get().status == InferenceOutcome::Status::kOk);
  }
  std::lock_guard lock(mutex);
  // Calls: the first alone; the two equal tiled ones together; the stricter tiled one with
  // its own threshold (no loosening); the two untiled ones together at the loosest options.
  CHECK(sizes == std::vector<int>{1, 2, 1, 2});
  REQUIRE(recorder->options_.size() == 4);
  CHECK(recorder->options_[1] == tiled);
  CHECK(recorder->options_[2] == stricter);
  CHECK(recorder->options_[3].tile_size == 0);
  CHECK(recorder->options_[3].score_threshold == 0.05f);
}

TEST_CASE("a mask given as a region of the image encodes as the full-size RLE",
          "[serving][response]") {
  ImageDetections image{4, 5, {}};
  Detection region;
  region.score = 0.9f;
  region.mask = {1, 1, 0, 1};  // 2x2 at (3, 1)
  region.mask_region = {3, 1, 2, 2};
  Detection whole = region;
  whole.mask.assign(20, 0);
  whole.mask[1 * 5 + 3] = whole.mask[1 * 5 + 4] = whole.mask[2 * 5 + 4] = 1;
  whole.mask_region = {};  // empty: the whole image
  image.detections = {region, whole};
  const auto json = nlohmann::json::parse(EncodeDetectionsJson({image}, false, true));
  CHECK(json["detections"][0]["mask"] == json["detections"][1]["mask"]);
  image.detections[0].mask.pop_back();
  CHECK_THROWS_WITH(EncodeDetectionsJson({image}, false, true), Catch::Contains("2x2 region"));
}

TEST_CASE("the executor honours deadlines, failures and its queue bound", "[serving][executor]") {
  std::vector<int> sizes;
  std::mutex mutex;
  InferenceExecutor executor(
      [&]() { return std::make_unique<RecordingPredictor>(sizes, mutex, 200ms); },
      BatchingPolicy{1, std::chrono::milliseconds(0), 2}, [](std::exception_ptr) {});
  WaitReady(executor);
  auto running = Submit(executor, {Canvas(2, 2)}, {});
  std::this_thread::sleep_for(50ms);  // the first one is running now
  auto expired = Submit(executor, {Canvas(2, 2)}, {}, std::chrono::steady_clock::now() + 10ms);
  auto queued = Submit(executor, {Canvas(2, 2)}, {});
  InferenceJob overflow;
  overflow.images.push_back(Canvas(2, 2));
  overflow.done = [](InferenceOutcome&&) { FAIL("a rejected job must not be called back"); };
  CHECK(executor.TrySubmit(std::move(overflow)) == InferenceExecutor::SubmitResult::kQueueFull);
  CHECK(running.get().status == InferenceOutcome::Status::kOk);
  CHECK(expired.get().status == InferenceOutcome::Status::kDeadlineExceeded);
  CHECK(queued.get().status == InferenceOutcome::Status::kOk);
}

TEST_CASE("predictor failures reach every request of the batch", "[serving][executor]") {
  ImageStatisticsConfig config;
  config.fail_on_width = 3;
  InferenceExecutor executor([&]() { return std::make_unique<ImageStatisticsPredictor>(config); },
                             BatchingPolicy{8, std::chrono::milliseconds(100), 8},
                             [](std::exception_ptr) {});
  WaitReady(executor);
  auto ok = Submit(executor, {Canvas(4, 4)}, {});
  auto bad = Submit(executor, {Canvas(3, 4)}, {});
  const auto first = ok.get();
  const auto second = bad.get();
  CHECK(first.status == InferenceOutcome::Status::kFailed);  // same batch
  CHECK(second.status == InferenceOutcome::Status::kFailed);
  CHECK(second.error.find("width 3") != std::string::npos);
}

TEST_CASE("a failing load is reported and the executor never becomes ready",
          "[serving][executor]") {
  std::promise<std::string> reported;
  ImageStatisticsConfig config;
  config.fail_load = true;
  InferenceExecutor executor([&]() { return std::make_unique<ImageStatisticsPredictor>(config); },
                             BatchingPolicy{},
                             [&](std::exception_ptr error) {
                               try {
                                 std::rethrow_exception(error);
                               } catch (const std::exception& e) {
                                 reported.set_value(e.what());
                               }
                             });
  CHECK(reported.get_future().get().find("fail_load") != std::string::npos);
  CHECK_FALSE(executor.Ready());
  InferenceJob job;
  job.done = [](InferenceOutcome&&) {};
  CHECK(executor.TrySubmit(std::move(job)) == InferenceExecutor::SubmitResult::kNotReady);
}

// Predicts only once `expected` predictions are in flight at the same time (or gives up
// after a generous bound): proves concurrency without timing the test.
class RendezvousPredictor final : public Predictor {
 public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable arrived;
    int in_flight = 0;
    int expected = 0;
    std::vector<int> sizes;
    bool all_met = true;
  };
  explicit RendezvousPredictor(Shared& shared) : shared_(shared) {}
  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions&) override {
    std::unique_lock lock(shared_.mutex);
    shared_.sizes.push_back(static_cast<int>(images.size()));
    ++shared_.in_flight;
    shared_.arrived.notify_all();
    if (!shared_.arrived.wait_for(lock, std::chrono::seconds(20),
                                  [&] { return shared_.in_flight >= shared_.expected; })) {
      shared_.all_met = false;
    }
    std::vector<ImageDetections> out;
    for (const auto& image : images) {
      out.push_back(ImageDetections{image.height, image.width, {}});
    }
    return out;
  }
  std::string Describe() const override { return "rendezvous"; }

 private:
  Shared& shared_;
};

TEST_CASE("several workers run requests side by side, each with its own predictor",
          "[serving][executor]") {
  RendezvousPredictor::Shared shared;
  shared.expected = 2;
  std::atomic<int> loads{0};
  std::promise<void> loaded;
  InferenceExecutor executor(
      [&]() {
        ++loads;
        return std::make_unique<RendezvousPredictor>(shared);
      },
      BatchingPolicy{4, std::chrono::milliseconds(50), 64, 2},
      [&](std::exception_ptr error) {
        CHECK_FALSE(error);
        loaded.set_value();  // a second call would throw: exactly once
      });
  loaded.get_future().get();
  CHECK(loads.load() == 2);
  CHECK(executor.Ready());

  // Two requests at once with both workers free: one each (not a batch of two on one
  // worker while the other idles). Each prediction waits until the other is in flight, so
  // this passes only if the two run at the same time.
  auto first = Submit(executor, {Canvas(4, 4)}, {});
  auto second = Submit(executor, {Canvas(4, 4)}, {});
  CHECK(first.get().status == InferenceOutcome::Status::kOk);
  CHECK(second.get().status == InferenceOutcome::Status::kOk);
  std::lock_guard lock(shared.mutex);
  CHECK(shared.all_met);
  CHECK(shared.sizes == std::vector<int>{1, 1});
}

TEST_CASE("a failing worker load is reported once and the executor never becomes ready",
          "[serving][executor]") {
  std::atomic<int> reports{0};
  std::promise<void> reported;
  ImageStatisticsConfig config;
  config.fail_load = true;
  {
    InferenceExecutor executor([&]() { return std::make_unique<ImageStatisticsPredictor>(config); },
                               BatchingPolicy{4, std::chrono::milliseconds(5), 64, 3},
                               [&](std::exception_ptr error) {
                                 CHECK(error);
                                 if (reports++ == 0) {
                                   reported.set_value();
                                 }
                               });
    reported.get_future().get();
    CHECK_FALSE(executor.Ready());
  }  // joins every worker: all loads have finished
  CHECK(reports.load() == 1);
}

namespace {

// A predictor that Overlaps(): each batch's Finish holds until the next batch has started (or
// a timeout), and every Start and Finish records how many batches were in flight.
class OverlappingPredictor final : public Predictor {
 public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    int started = 0;
    int finished = 0;
    int most_in_flight = 0;
    int finishes_that_saw_the_next_start = 0;
    std::vector<std::thread::id> start_threads;
    std::vector<std::thread::id> finish_threads;
    int fail_finish_of_batch = -1;  // this batch's Finish throws
  };
  explicit OverlappingPredictor(Shared& shared) : shared_(shared) {}

  std::vector<ImageDetections> Predict(std::span<const RgbImageView> images,
                                       const PredictOptions& options) override {
    return Start(images, options)->Finish();
  }

  std::unique_ptr<StartedBatch> Start(std::span<const RgbImageView> images,
                                      const PredictOptions&) override {
    std::vector<ImageDetections> results;
    for (const RgbImageView& image : images) {
      Detection d;
      d.score = 0.9f;
      d.category_id = image.width;  // which image this answers
      results.push_back(ImageDetections{image.height, image.width, {d}});
    }
    int batch = 0;
    {
      std::lock_guard lock(shared_.mutex);
      batch = shared_.started++;
      shared_.most_in_flight = std::max(shared_.most_in_flight, shared_.started - shared_.finished);
      shared_.start_threads.push_back(std::this_thread::get_id());
    }
    shared_.changed.notify_all();
    return std::make_unique<Batch>(shared_, batch, std::move(results));
  }
  bool Overlaps() const override { return true; }
  std::string Describe() const override { return "overlapping"; }

 private:
  class Batch final : public StartedBatch {
   public:
    Batch(Shared& shared, int index, std::vector<ImageDetections> results)
        : shared_(shared), index_(index), results_(std::move(results)) {}
    std::vector<ImageDetections> Finish() override {
      std::unique_lock lock(shared_.mutex);
      shared_.finish_threads.push_back(std::this_thread::get_id());
      if (shared_.changed.wait_for(lock, 1s, [&] { return shared_.started > index_ + 1; })) {
        ++shared_.finishes_that_saw_the_next_start;
      }
      ++shared_.finished;
      if (index_ == shared_.fail_finish_of_batch) {
        throw std::runtime_error("copy failed on purpose");
      }
      return std::move(results_);
    }

   private:
    Shared& shared_;
    int index_;
    std::vector<ImageDetections> results_;
  };
  Shared& shared_;
};

}  // namespace

TEST_CASE("an overlapping predictor finishes one batch while the next one starts, two at most",
          "[serving][executor]") {
  OverlappingPredictor::Shared shared;
  shared.fail_finish_of_batch = 2;
  std::thread::id worker_thread;
  InferenceExecutor executor(
      [&]() {
        worker_thread = std::this_thread::get_id();
        return std::make_unique<OverlappingPredictor>(shared);
      },
      BatchingPolicy{1, std::chrono::milliseconds(0), 64}, [](std::exception_ptr) {});
  WaitReady(executor);  // the warm-up is the loader's own business: no batch yet
  std::vector<std::future<InferenceOutcome>> futures;
  for (int i = 0; i < 5; ++i) {
    futures.push_back(Submit(executor, {Canvas(10 + i, 4)}, {}));
  }
  for (int i = 0; i < 5; ++i) {
    InferenceOutcome outcome = futures[static_cast<size_t>(i)].get();
    if (i == 2) {
      CHECK(outcome.status == InferenceOutcome::Status::kFailed);
      CHECK(outcome.error == "copy failed on purpose");
      continue;
    }
    REQUIRE(outcome.status == InferenceOutcome::Status::kOk);
    REQUIRE(outcome.results.size() == 1);
    CHECK(outcome.results[0].detections.at(0).category_id == 10 + i);  // in order, its own
  }
  std::lock_guard lock(shared.mutex);
  CHECK(shared.started == 5);
  CHECK(shared.finished == 5);
  // Batches 0..3 each had the next one started before they finished; the last had none.
  CHECK(shared.finishes_that_saw_the_next_start == 4);
  CHECK(shared.most_in_flight == 2);
  for (const auto& id : shared.start_threads) {
    CHECK(id == worker_thread);
  }
  for (const auto& id : shared.finish_threads) {
    CHECK(id != worker_thread);
  }
}

TEST_CASE("stopping an overlapping executor answers the batch finishing and the one started",
          "[serving][executor]") {
  ImageStatisticsConfig config;
  config.finish_delay = 200ms;
  REQUIRE(ImageStatisticsPredictor(config).Overlaps());
  InferenceExecutor executor([&]() { return std::make_unique<ImageStatisticsPredictor>(config); },
                             BatchingPolicy{1, std::chrono::milliseconds(0), 64},
                             [](std::exception_ptr) {});
  WaitReady(executor);
  auto finishing = Submit(executor, {Canvas(4, 4)}, {});
  auto started = Submit(executor, {Canvas(4, 4)}, {});
  auto queued = Submit(executor, {Canvas(4, 4)}, {});
  auto also_queued = Submit(executor, {Canvas(4, 4)}, {});
  // Once two requests have left the queue, the first is finishing and the worker is handing
  // over the second.
  for (int i = 0; i < 200 && executor.QueueDepth() > 2; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(executor.QueueDepth() == 2);
  executor.Stop();
  CHECK(finishing.get().status == InferenceOutcome::Status::kOk);
  CHECK(started.get().status == InferenceOutcome::Status::kOk);
  // The worker was blocked handing the second batch over, so it never took the third.
  CHECK(queued.get().status == InferenceOutcome::Status::kStopped);
  CHECK(also_queued.get().status == InferenceOutcome::Status::kStopped);
}
