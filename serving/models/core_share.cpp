#include "serving/models/core_share.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace mrcnn::serving {

int IntraOpThreads(int cores, int workers, int busy) {
  busy = std::clamp(busy, 1, std::max(workers, 1));
  return std::max(1, cores / busy);
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(1, CPU_COUNT(&set));
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace mrcnn::serving
