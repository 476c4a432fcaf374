#include "serving/http/session_timeouts.h"

namespace mrcnn::serving {

std::chrono::milliseconds TransferTime(std::chrono::milliseconds base, uint64_t bytes,
                                       double bytes_per_second) {
  return base + std::chrono::milliseconds(
                    static_cast<int64_t>(static_cast<double>(bytes) / bytes_per_second * 1000.0));
}

}  // namespace mrcnn::serving
