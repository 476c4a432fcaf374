// CudaSyncCounter in builds without CUDA: nothing to count, and nothing may ask.
#include <stdexcept>

#include "bench/model/cuda_sync_counter.h"

namespace mrcnn::bench {

bool CudaSyncCounter::Available() {
  return false;
}

CudaSyncCounter::CudaSyncCounter(bool) {
  throw std::logic_error("CudaSyncCounter: this build has no CUDA (check Available() first)");
}

CudaSyncCounter::~CudaSyncCounter() = default;

int64_t CudaSyncCounter::Take() {
  return 0;
}

}  // namespace mrcnn::bench
