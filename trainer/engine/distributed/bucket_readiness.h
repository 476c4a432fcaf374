#pragma once
// Which gradient buckets may start their all-reduce while backward still runs (the
// bookkeeping of PyTorch DDP's reducer, without its tensors): a bucket is complete when
// every one of its parameters has been marked ready, and bucket k launches only once it is
// complete and buckets 0..k-1 have launched. The launch order is therefore the bucket
// order on every rank, whatever order backward finishes the parameters in, which the ring
// and NCCL require (every rank must issue the same collectives in the same order).
//
// Optionally records the sequence of readiness marks and launches of one iteration, so a
// test (or a person reading MRCNN_BUCKET_TRACE_DIR's files) can check that buckets launched
// as soon as backward made them ready. Single-threaded: the caller serialises calls (the
// autograd engine runs one parameter's hooks at a time per device). Torch-free.
#include <cstddef>
#include <string>
#include <vector>

namespace mrcnn::engine::dist {

struct ReadinessEvent {
  enum class Kind { kReady, kBackwardEnd, kLaunch };
  Kind kind;
  size_t index;  // the parameter (kReady) or bucket (kLaunch); 0 for kBackwardEnd
};

// Buckets [first, last) may launch now, in this order.
struct LaunchRange {
  size_t first = 0, last = 0;
  bool empty() const { return first == last; }
};

class BucketReadiness {
 public:
  // bucket_of[p]: the bucket of parameter p (buckets are numbered in launch order; every
  // bucket in [0, num_buckets) must hold at least one parameter). Throws
  // std::invalid_argument otherwise.
  BucketReadiness(std::vector<size_t> bucket_of, size_t num_buckets);

  // Starts an iteration: nothing ready, nothing launched; `record` keeps its events.
  void Reset(bool record = false);
  // Parameter p's gradient is final. Throws std::logic_error when p was already marked
  // since Reset (a hook fired twice: the gradient would be reduced before it is final).
  LaunchRange MarkReady(size_t p);
  // Backward has ended: marks every parameter not yet marked (those that got no gradient
  // in it) and returns the buckets still to launch.
  LaunchRange MarkRestReady();
  // Parameters not yet marked since Reset, in increasing order.
  std::vector<size_t> Unready() const;
  bool all_launched() const { return next_launch_ == pending_.size(); }
  size_t num_buckets() const { return pending_.size(); }
  // The recorded events since the last Reset(true); empty otherwise.
  const std::vector<ReadinessEvent>& events() const { return events_; }

 private:
  LaunchRange Advance();
  void Record(ReadinessEvent::Kind kind, size_t index);

  std::vector<size_t> bucket_of_;
  std::vector<size_t> size_;     // parameters per bucket
  std::vector<size_t> pending_;  // parameters not yet ready, per bucket
  std::vector<bool> ready_;
  size_t next_launch_ = 0;
  bool record_ = false;
  std::vector<ReadinessEvent> events_;
};

// One event per line ("ready 12", "backward_end", "launch 3"), preceded by the layout
// ("bucket 0: 61 60 59"); the format of MRCNN_BUCKET_TRACE_DIR's files.
std::string FormatBucketTrace(const std::vector<std::vector<size_t>>& layout,
                              const std::vector<ReadinessEvent>& events);

}  // namespace mrcnn::engine::dist
