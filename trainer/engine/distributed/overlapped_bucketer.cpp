#include "trainer/engine/distributed/overlapped_bucketer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <fstream>
#include <functional>
#include <stdexcept>
#include <utility>

namespace mrcnn::engine::dist {
namespace {

std::vector<size_t> BucketOf(const std::vector<GradientBucket>& buckets, size_t num_params) {
  std::vector<size_t> bucket_of(num_params);
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (size_t p : buckets[b].params)
      bucket_of[p] = b;
  }
  return bucket_of;
}

class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  explicit ReadyHook(std::function<void()> on_ready) : on_ready_(std::move(on_ready)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    on_ready_();
    return outputs;
  }

 private:
  std::function<void()> on_ready_;
};

}  // namespace

OverlappedGradientBucketer::OverlappedGradientBucketer(std::vector<at::Tensor> params,
                                                       size_t bucket_bytes,
                                                       AsyncGradientReducer& reducer,
                                                       int world_size, std::string trace_path)
    : params_(std::move(params)),
      buckets_(LayoutGradientBuckets(params_, bucket_bytes)),
      bucket_of_(BucketOf(buckets_, params_.size())),
      slot_of_(params_.size()),
      readiness_(bucket_of_, buckets_.size()),
      reducer_(reducer),
      world_size_(world_size),
      trace_path_(std::move(trace_path)) {
  for (const GradientBucket& b : buckets_) {
    for (size_t i = 0; i < b.params.size(); ++i)
      slot_of_[b.params[i]] = i;
  }
  for (size_t p = 0; p < params_.size(); ++p) {
    // A parameter that does not require a gradient has no accumulator: it is packed as
    // zeros (or its .grad) after backward, like one that got no gradient.
    if (!params_[p].requires_grad())
      continue;
    std::shared_ptr<torch::autograd::Node> acc =
        torch::autograd::impl::grad_accumulator(params_[p]);
    if (!acc)
      throw std::runtime_error("parameter " + std::to_string(p) + " has no gradient accumulator");
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<ReadyHook>([this, p] { OnGradientReady(p); })));
    accumulators_.push_back(std::move(acc));
  }
}

OverlappedGradientBucketer::~OverlappedGradientBucketer() {
  for (size_t i = 0; i < accumulators_.size(); ++i)
    accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void OverlappedGradientBucketer::ArmForFinalBackward() {
  if (armed_)
    throw std::logic_error("OverlappedGradientBucketer: armed twice without FinishAndAverage");
  readiness_.Reset(/*record=*/iterations_ == 0 && !trace_path_.empty());
  armed_ = true;
}

void OverlappedGradientBucketer::Launch(LaunchRange range) {
  for (size_t b = range.first; b < range.last; ++b)
    reducer_.Launch(buckets_[b].flat);
}

void OverlappedGradientBucketer::OnGradientReady(size_t param) {
  if (!armed_)
    return;  // an accumulating micro-batch: .grad is not final yet
  PackGradient(params_[param], buckets_[bucket_of_[param]], slot_of_[param]);
  Launch(readiness_.MarkReady(param));
}

void OverlappedGradientBucketer::FinishAndAverage() {
  if (!armed_)
    readiness_.Reset(/*record=*/iterations_ == 0 && !trace_path_.empty());
  armed_ = false;
  for (size_t p : readiness_.Unready())
    PackGradient(params_[p], buckets_[bucket_of_[p]], slot_of_[p]);
  Launch(readiness_.MarkRestReady());
  reducer_.WaitAll();
  for (GradientBucket& b : buckets_)
    UnpackMean(b, params_, world_size_);
  if (iterations_++ == 0 && !trace_path_.empty()) {
    std::vector<std::vector<size_t>> layout;
    for (const GradientBucket& b : buckets_)
      layout.push_back(b.params);
    std::ofstream(trace_path_) << FormatBucketTrace(layout, readiness_.events());
  }
}

}  // namespace mrcnn::engine::dist
