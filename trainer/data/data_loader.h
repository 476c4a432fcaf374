#pragma once
// A loader over a CocoDataset: worker threads decode and transform images, a bounded
// prefetch queue hands batches out in a deterministic order (the same seed gives the same
// batches whatever the number of workers). Training mode is an infinite iterator over
// epochs of a DistributedSampler shard; evaluation mode is one in-order pass over this
// rank's shard. Missing, undecodable, truncated or corrupt images (image_decode.h) are
// skipped and counted (or fatal when bad_images == kFail), each named once on stderr.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/sampler.h"
#include "trainer/data/transforms.h"

namespace mrcnn::data {

struct LoaderOptions {
  std::filesystem::path image_root;  // file_name is relative to this
  int64_t batch_size = 2;
  int num_workers = 2;
  int prefetch_batches = 4;
  bool training = true;  // infinite, shuffled, augmented; else one ordered pass
  bool group_by_aspect_ratio = true;
  TransformSpec transform;
  Normalization normalization;
  int64_t size_divisibility = 32;
  int64_t rank = 0, world_size = 1;
  uint64_t seed = 0;
  BadItemPolicy bad_images = BadItemPolicy::kSkip;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const CocoDataset> dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch; std::nullopt only at the end of an evaluation pass. Rethrows a
  // worker's fatal error.
  std::optional<Batch> Next();
  int64_t skipped_images() const { return skipped_images_.load(); }
  // Epoch of the most recently planned batch (training).
  int64_t epoch() const { return epoch_.load(); }

 private:
  struct Job {
    uint64_t sequence = 0;
    int64_t epoch = 0;
    std::vector<size_t> indices;
  };
  void PlanBatches();
  void WorkerLoop();
  Batch LoadBatch(const Job& job);
  std::optional<Job> NextJob();

  std::shared_ptr<const CocoDataset> ds_;
  LoaderOptions opt_;
  DistributedSampler sampler_;
  std::unique_ptr<AspectRatioGrouper> grouper_;
  // Planning state (guarded by mu_).
  int64_t plan_epoch_ = 0;
  std::vector<size_t> plan_indices_;
  size_t plan_pos_ = 0;
  bool plan_done_ = false;
  uint64_t next_sequence_ = 0;
  std::deque<Job> pending_;
  // Results.
  std::mutex mu_;
  std::condition_variable cv_work_, cv_result_;
  std::map<uint64_t, Batch> ready_;
  uint64_t next_out_ = 0;
  uint64_t in_flight_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::atomic<int64_t> skipped_images_{0};
  std::atomic<int64_t> epoch_{0};
  std::vector<std::thread> workers_;
};

}  // namespace mrcnn::data
