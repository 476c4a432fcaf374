#include "bench/model/aten_op_counter.h"

#include <ATen/record_function.h>
#include <c10/util/Backtrace.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace mrcnn::bench {
namespace {

// The observer is a plain function (RecordFunctionCallback takes no captures): its counts
// live here, guarded by a mutex, since backward runs operators on other threads.
std::mutex counts_mutex;
std::unordered_map<std::string, int64_t> counts;
bool counter_exists = false;
std::string traced_op;

// A copy from a CUDA tensor into a CPU one: the host waits for it (counted as a sync, not
// as another operator: the copy_ itself is counted under its name too).
constexpr const char* kDeviceToHostCopy = "device-to-host copy_";

bool IsDeviceToHostCopy(const at::RecordFunction& fn) {
  if (std::strcmp(fn.name(), "aten::copy_") != 0)
    return false;
  const auto inputs = fn.inputs();
  return inputs.size() >= 2 && inputs[0].isTensor() && inputs[1].isTensor() &&
         inputs[0].toTensor().is_cpu() && inputs[1].toTensor().is_cuda();
}

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (name != nullptr) {
    const bool d2h = IsDeviceToHostCopy(fn);
    const std::lock_guard<std::mutex> lock(counts_mutex);
    ++counts[name];
    if (d2h)
      ++counts[kDeviceToHostCopy];
    if (!traced_op.empty() && traced_op == name)
      std::fprintf(
          stderr, "[op trace] %s from:\n%s\n", name,
          c10::get_backtrace(/*frames_to_skip=*/1, /*maximum_number_of_frames=*/40).c_str());
  }
  return nullptr;
}

}  // namespace

bool IsHostSyncOp(const std::string& name) {
  return name == "aten::_local_scalar_dense" || name == "aten::nonzero" ||
         name == "aten::masked_select" || name == "aten::_unique" || name == "aten::_unique2" ||
         name == "aten::unique_dim" || name == "aten::unique_consecutive" || name == "aten::equal";
}

AtenOpCounter::AtenOpCounter(std::string trace_op) {
  {
    const std::lock_guard<std::mutex> lock(counts_mutex);
    if (counter_exists)
      throw std::logic_error("AtenOpCounter: one counter at a time");
    counter_exists = true;
    counts.clear();
    traced_op = std::move(trace_op);
  }
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&OnOpStart)
                                      .needsInputs(true)
                                      .needsOutputs(false)
                                      .scopes({at::RecordScope::FUNCTION}));
  active_ = true;
}

AtenOpCounter::~AtenOpCounter() {
  if (active_)
    Take();
}

AtenOpCounts AtenOpCounter::Take() {
  if (active_) {
    at::removeCallback(handle_);
    active_ = false;
  }
  AtenOpCounts out;
  const std::lock_guard<std::mutex> lock(counts_mutex);
  for (const auto& [name, n] : counts) {
    if (name == kDeviceToHostCopy) {
      out.sync_ops += n;
      out.sync_by_op[name] += n;
    } else if (name.rfind("aten::", 0) == 0) {
      out.all_ops += n;
      if (IsHostSyncOp(name)) {
        out.sync_ops += n;
        out.sync_by_op[name] += n;
      }
    } else if (name.find("::") != std::string::npos) {
      out.other_namespaces[name.substr(0, name.find("::"))] += n;
    }
  }
  counts.clear();
  counter_exists = false;
  return out;
}

}  // namespace mrcnn::bench
