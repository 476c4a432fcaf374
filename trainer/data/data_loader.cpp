#include "trainer/data/data_loader.h"

#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>

#include "trainer/data/image_decode.h"

namespace mrcnn::data {

DataLoader::DataLoader(std::shared_ptr<const CocoDataset> dataset, LoaderOptions options)
    : ds_(std::move(dataset)),
      opt_(std::move(options)),
      sampler_(ds_->images().size(), opt_.rank, opt_.world_size, opt_.seed, opt_.training) {
  if (opt_.batch_size < 1)
    throw std::invalid_argument("DataLoader: batch_size must be >= 1");
  if (opt_.num_workers < 1)
    opt_.num_workers = 1;
  if (opt_.prefetch_batches < 1)
    opt_.prefetch_batches = 1;
  opt_.transform.training = opt_.training;
  if (opt_.training && opt_.group_by_aspect_ratio) {
    std::vector<uint8_t> portrait;
    portrait.reserve(ds_->images().size());
    // Detectron2's two buckets: w > h, and the rest (squares go with the portraits), from
    // the dataset's original sizes.
    for (const auto& im : ds_->images())
      portrait.push_back(!(im.width > im.height));
    grouper_ = std::make_unique<AspectRatioGrouper>(std::move(portrait),
                                                    static_cast<size_t>(opt_.batch_size));
  }
  for (int w = 0; w < opt_.num_workers; ++w)
    workers_.emplace_back([this] { WorkerLoop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  cv_result_.notify_all();
  for (auto& t : workers_)
    t.join();
}

std::optional<DataLoader::Job> DataLoader::NextJob() {
  Job job;
  while (true) {
    if (plan_pos_ == plan_indices_.size()) {
      if (!opt_.training && plan_epoch_ > 0) {
        if (job.indices.empty())
          return std::nullopt;
        break;  // last, partial batch of the evaluation pass
      }
      plan_indices_ = sampler_.EpochIndices(plan_epoch_++);
      plan_pos_ = 0;
    }
    const size_t index = plan_indices_[plan_pos_++];
    job.epoch = plan_epoch_ - 1;
    if (grouper_) {
      auto group = grouper_->Push(index);
      if (!group.empty()) {
        job.indices = std::move(group);
        break;
      }
    } else {
      job.indices.push_back(index);
      if (static_cast<int64_t>(job.indices.size()) == opt_.batch_size)
        break;
    }
  }
  job.sequence = next_sequence_++;
  epoch_ = job.epoch;
  return job;
}

void DataLoader::WorkerLoop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] {
        return stop_ || (!plan_done_ && !error_ &&
                         in_flight_ < static_cast<uint64_t>(opt_.prefetch_batches));
      });
      if (stop_ || plan_done_ || error_)
        return;
      auto next = NextJob();
      if (!next) {
        plan_done_ = true;
        cv_result_.notify_all();
        cv_work_.notify_all();
        return;
      }
      job = std::move(*next);
      ++in_flight_;
    }
    try {
      Batch batch = LoadBatch(job);
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(job.sequence, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_)
        error_ = std::current_exception();
    }
    cv_result_.notify_all();
  }
}

Batch DataLoader::LoadBatch(const Job& job) {
  std::vector<InstanceSample> samples;
  samples.reserve(job.indices.size());
  for (size_t index : job.indices) {
    const CocoImage& im = ds_->images()[index];
    const auto path = opt_.image_root / im.file_name;
    // Per-sample randomness from (seed, epoch, index) only: independent of scheduling.
    std::seed_seq seq{static_cast<uint32_t>(opt_.seed), static_cast<uint32_t>(opt_.seed >> 32),
                      static_cast<uint32_t>(job.epoch), static_cast<uint32_t>(index),
                      static_cast<uint32_t>(index >> 32)};
    std::mt19937_64 rng(seq);
    try {
      cv::Mat rgb = DecodeImageRgb(path);
      if (rgb.rows != im.height || rgb.cols != im.width) {
        throw std::runtime_error(path.string() + ": decoded size " + std::to_string(rgb.cols) +
                                 "x" + std::to_string(rgb.rows) + " differs from " +
                                 std::to_string(im.width) + "x" + std::to_string(im.height) +
                                 " in " + ds_->source() + " (image id " + std::to_string(im.id) +
                                 ")");
      }
      samples.push_back(
          TransformInstances(rgb, im, ds_->AnnotationsOfImage(index), opt_.transform, rng));
    } catch (const std::exception& e) {
      if (opt_.bad_images == BadItemPolicy::kFail) {
        throw std::runtime_error(std::string(e.what()) + " (bad_images policy is 'fail')");
      }
      const int64_t n = ++skipped_images_;
      if (n <= 20)
        std::fprintf(stderr, "data: skipping image: %s\n", e.what());
    }
  }
  return CollateBatch(samples, opt_.normalization, opt_.size_divisibility);
}

std::optional<Batch> DataLoader::Next() {
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_result_.wait(lock, [&] {
      return error_ || ready_.count(next_out_) || (plan_done_ && next_out_ == next_sequence_);
    });
    if (error_)
      std::rethrow_exception(error_);
    auto it = ready_.find(next_out_);
    if (it == ready_.end())
      return std::nullopt;
    Batch b = std::move(it->second);
    ready_.erase(it);
    ++next_out_;
    --in_flight_;
    lock.unlock();
    cv_work_.notify_all();
    if (!b.empty())
      return b;  // a batch whose images were all skipped is dropped
  }
}

}  // namespace mrcnn::data
