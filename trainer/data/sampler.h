#pragma once
// Index streams for training: a distributed sampler (each rank its own shard, the same
// permutation on every rank for an epoch, derived from seed and epoch only, so it is
// reproducible across runs, thread counts and platforms) and aspect-ratio grouping
// (batches of all-landscape or all-portrait images, as Detectron2 does, to waste less
// padding). Torch-free.
#include <cstdint>
#include <vector>

namespace mrcnn::data {

class DistributedSampler {
 public:
  // Like torch.utils.data.DistributedSampler with drop_last=false: the permutation is
  // padded by wrapping around to a multiple of world_size, rank r takes every
  // world_size-th index starting at r, so all ranks get the same count.
  DistributedSampler(size_t dataset_size, int64_t rank, int64_t world_size, uint64_t seed,
                     bool shuffle = true);
  std::vector<size_t> EpochIndices(int64_t epoch) const;
  size_t ShardSize() const;

 private:
  size_t size_;
  int64_t rank_, world_;
  uint64_t seed_;
  bool shuffle_;
};

// Deterministic permutation of 0..n-1 (Fisher-Yates over splitmix64); portable.
std::vector<size_t> SeededPermutation(size_t n, uint64_t seed);

// Feeds indices one by one; returns a full batch of same-orientation indices when one
// bucket fills up (else an empty vector).
class AspectRatioGrouper {
 public:
  AspectRatioGrouper(std::vector<uint8_t> is_portrait, size_t batch_size);
  std::vector<size_t> Push(size_t index);

 private:
  std::vector<uint8_t> portrait_;
  size_t batch_size_;
  std::vector<size_t> buckets_[2];
};

}  // namespace mrcnn::data
