#include "trainer/data/sampler.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace mrcnn::data {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Unbiased draw in [0, bound): reject the top partial range, then reduce.
uint64_t Below(uint64_t bound, uint64_t& state) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  while (true) {
    const uint64_t r = SplitMix64(state);
    if (r < limit)
      return r % bound;
  }
}

}  // namespace

std::vector<size_t> SeededPermutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i)
    p[i] = i;
  uint64_t state = seed;
  for (size_t i = n; i > 1; --i)
    std::swap(p[i - 1], p[Below(i, state)]);
  return p;
}

DistributedSampler::DistributedSampler(size_t dataset_size, int64_t rank, int64_t world_size,
                                       uint64_t seed, bool shuffle)
    : size_(dataset_size), rank_(rank), world_(world_size), seed_(seed), shuffle_(shuffle) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) +
                                " is not within world size " + std::to_string(world_size));
  }
  if (dataset_size == 0)
    throw std::invalid_argument("DistributedSampler: the dataset is empty");
}

size_t DistributedSampler::ShardSize() const {
  const size_t w = static_cast<size_t>(world_);
  return (size_ + w - 1) / w;
}

std::vector<size_t> DistributedSampler::EpochIndices(int64_t epoch) const {
  std::vector<size_t> order;
  if (shuffle_) {
    order = SeededPermutation(size_, seed_ * 0x100000001B3ull + static_cast<uint64_t>(epoch));
  } else {
    order.resize(size_);
    for (size_t i = 0; i < size_; ++i)
      order[i] = i;
  }
  const size_t w = static_cast<size_t>(world_);
  const size_t total = ShardSize() * w;
  for (size_t i = 0; order.size() < total; ++i)
    order.push_back(order[i % size_]);
  std::vector<size_t> shard;
  shard.reserve(ShardSize());
  for (size_t i = static_cast<size_t>(rank_); i < total; i += w)
    shard.push_back(order[i]);
  return shard;
}

AspectRatioGrouper::AspectRatioGrouper(std::vector<uint8_t> is_portrait, size_t batch_size)
    : portrait_(std::move(is_portrait)), batch_size_(batch_size) {
  if (batch_size == 0)
    throw std::invalid_argument("AspectRatioGrouper: batch size is 0");
}

std::vector<size_t> AspectRatioGrouper::Push(size_t index) {
  auto& bucket = buckets_[portrait_.at(index) ? 1 : 0];
  bucket.push_back(index);
  if (bucket.size() < batch_size_)
    return {};
  std::vector<size_t> out;
  out.swap(bucket);
  return out;
}

}  // namespace mrcnn::data
