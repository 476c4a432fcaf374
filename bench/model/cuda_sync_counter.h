#pragma once
// Counts the times torch makes the host wait for a CUDA device: every blocking copy (in
// either direction, .item() included), stream, event and device synchronisation that goes
// through c10's sync helpers, by switching on torch's sync debug mode
// (torch.cuda.set_sync_debug_mode("warn")) and counting its warnings. Unlike the operator
// counter (aten_op_counter.h), this sees the waits no operator name gives away, such as
// a small host tensor copied to the device with non_blocking=false. Warnings raised in
// backward's device threads reach the counter when backward returns (autograd replays
// them on the calling thread).
#include <cstdint>

namespace mrcnn::bench {

class CudaSyncCounter {
 public:
  // Whether this build can count (it was compiled with CUDA).
  static bool Available();
  // Starts counting; with `trace`, prints the C++ stack of each wait to stderr.
  explicit CudaSyncCounter(bool trace);
  ~CudaSyncCounter();
  CudaSyncCounter(const CudaSyncCounter&) = delete;
  CudaSyncCounter& operator=(const CudaSyncCounter&) = delete;
  // Stops counting and returns the number of waits seen.
  int64_t Take();

 private:
  bool active_ = false;
};

}  // namespace mrcnn::bench
