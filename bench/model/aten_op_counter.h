#pragma once
// Counts the ATen operators a stretch of code dispatches, through a global RecordFunction
// observer (every thread, autograd's backward threads included): all of them (a proxy for
// kernel launches) and those that make a CUDA device wait for the host to read a value
// (host syncs). Read from the dispatcher, not from our code, so a sync that a library call
// hides is counted too. The same observer sees the same operators on CPU, so the sync
// count can be measured on a machine without a GPU.
#include <cstdint>
#include <map>
#include <string>

namespace mrcnn::bench {

// The operators that wait for the device: `.item()` and friends (_local_scalar_dense),
// data-dependent output sizes (nonzero, behind torch::where(cond) and boolean indexing;
// masked_select; unique), and whole-tensor comparisons that return a bool (equal). On a
// GPU a copy_ from a CUDA into a CPU tensor waits too: counted as "device-to-host copy_"
// (never seen on CPU, where no tensor is on CUDA).
bool IsHostSyncOp(const std::string& name);

struct AtenOpCounts {
  int64_t all_ops = 0;   // every operator of the aten:: namespace
  int64_t sync_ops = 0;  // those IsHostSyncOp names
  std::map<std::string, int64_t> sync_by_op;
  std::map<std::string, int64_t> other_namespaces;  // custom ops (mrcnn::, torchvision::)
};

// Counts between construction and Take(). One counter at a time per process.
// `trace_op`, when not empty, names an operator (e.g. "aten::_local_scalar_dense") whose
// every call prints the C++ stack to stderr: how to find where a sync comes from.
class AtenOpCounter {
 public:
  explicit AtenOpCounter(std::string trace_op = "");
  ~AtenOpCounter();
  AtenOpCounter(const AtenOpCounter&) = delete;
  AtenOpCounter& operator=(const AtenOpCounter&) = delete;
  // Stops counting and returns what was counted.
  AtenOpCounts Take();

 private:
  uint64_t handle_ = 0;
  bool active_ = false;
};

}  // namespace mrcnn::bench
