#include "trainer/engine/distributed/bucket_readiness.h"

#include <stdexcept>

namespace mrcnn::engine::dist {

BucketReadiness::BucketReadiness(std::vector<size_t> bucket_of, size_t num_buckets)
    : bucket_of_(std::move(bucket_of)), size_(num_buckets, 0) {
  for (size_t p = 0; p < bucket_of_.size(); ++p) {
    if (bucket_of_[p] >= num_buckets) {
      throw std::invalid_argument("BucketReadiness: parameter " + std::to_string(p) +
                                  " is in bucket " + std::to_string(bucket_of_[p]) + " of " +
                                  std::to_string(num_buckets));
    }
    ++size_[bucket_of_[p]];
  }
  for (size_t b = 0; b < num_buckets; ++b) {
    // An empty bucket would launch before backward starts, which is harmless but means
    // the layout is wrong.
    if (size_[b] == 0)
      throw std::invalid_argument("BucketReadiness: bucket " + std::to_string(b) + " is empty");
  }
  Reset();
}

void BucketReadiness::Reset(bool record) {
  pending_ = size_;
  ready_.assign(bucket_of_.size(), false);
  next_launch_ = 0;
  record_ = record;
  events_.clear();
}

void BucketReadiness::Record(ReadinessEvent::Kind kind, size_t index) {
  if (record_)
    events_.push_back({kind, index});
}

LaunchRange BucketReadiness::Advance() {
  LaunchRange range{next_launch_, next_launch_};
  while (next_launch_ < pending_.size() && pending_[next_launch_] == 0) {
    Record(ReadinessEvent::Kind::kLaunch, next_launch_);
    range.last = ++next_launch_;
  }
  return range;
}

LaunchRange BucketReadiness::MarkReady(size_t p) {
  if (p >= ready_.size())
    throw std::out_of_range("BucketReadiness: no parameter " + std::to_string(p));
  if (ready_[p]) {
    throw std::logic_error("gradient of parameter " + std::to_string(p) +
                           " marked ready twice in one iteration (its hook fired twice)");
  }
  ready_[p] = true;
  Record(ReadinessEvent::Kind::kReady, p);
  --pending_[bucket_of_[p]];
  return Advance();
}

LaunchRange BucketReadiness::MarkRestReady() {
  Record(ReadinessEvent::Kind::kBackwardEnd, 0);
  for (size_t p = 0; p < ready_.size(); ++p) {
    if (!ready_[p]) {
      ready_[p] = true;
      Record(ReadinessEvent::Kind::kReady, p);
      --pending_[bucket_of_[p]];
    }
  }
  return Advance();
}

std::vector<size_t> BucketReadiness::Unready() const {
  std::vector<size_t> out;
  for (size_t p = 0; p < ready_.size(); ++p) {
    if (!ready_[p])
      out.push_back(p);
  }
  return out;
}

std::string FormatBucketTrace(const std::vector<std::vector<size_t>>& layout,
                              const std::vector<ReadinessEvent>& events) {
  std::string text;
  for (size_t b = 0; b < layout.size(); ++b) {
    text.append("bucket ").append(std::to_string(b)).append(":");
    for (size_t p : layout[b])
      text.append(" ").append(std::to_string(p));
    text.append("\n");
  }
  for (const ReadinessEvent& e : events) {
    switch (e.kind) {
      case ReadinessEvent::Kind::kReady:
        text.append("ready ").append(std::to_string(e.index));
        break;
      case ReadinessEvent::Kind::kBackwardEnd:
        text.append("backward_end");
        break;
      case ReadinessEvent::Kind::kLaunch:
        text.append("launch ").append(std::to_string(e.index));
        break;
    }
    text.append("\n");
  }
  return text;
}

}  // namespace mrcnn::engine::dist
