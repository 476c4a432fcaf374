#include "bench/model/cuda_sync_counter.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Backtrace.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace mrcnn::bench {
namespace {

constexpr const char* kSyncWarning = "called a synchronizing CUDA operation";

// Counts torch's sync warnings and hands every other warning to the handler it replaced.
class SyncWarningCounter : public c10::WarningHandler {
 public:
  explicit SyncWarningCounter(bool trace) : trace_(trace) {}
  void process(const c10::Warning& warning) override {
    if (std::strstr(warning.msg().c_str(), kSyncWarning) == nullptr) {
      previous_->process(warning);
      return;
    }
    ++count_;
    if (trace_)
      std::fprintf(
          stderr, "[cuda sync] from:\n%s\n",
          c10::get_backtrace(/*frames_to_skip=*/1, /*maximum_number_of_frames=*/40).c_str());
  }
  int64_t count() const { return count_; }
  c10::WarningHandler* previous_ = nullptr;

 private:
  bool trace_;
  int64_t count_ = 0;
};

std::unique_ptr<SyncWarningCounter> counter;

}  // namespace

bool CudaSyncCounter::Available() {
  return true;
}

CudaSyncCounter::CudaSyncCounter(bool trace) {
  if (counter)
    throw std::logic_error("CudaSyncCounter: one counter at a time");
  counter = std::make_unique<SyncWarningCounter>(trace);
  counter->previous_ = c10::WarningUtils::get_warning_handler();
  c10::WarningUtils::set_warning_handler(counter.get());
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  active_ = true;
}

CudaSyncCounter::~CudaSyncCounter() {
  if (active_)
    Take();
}

int64_t CudaSyncCounter::Take() {
  if (!active_)
    return 0;
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  c10::WarningUtils::set_warning_handler(counter->previous_);
  const int64_t n = counter->count();
  counter.reset();
  active_ = false;
  return n;
}

}  // namespace mrcnn::bench
