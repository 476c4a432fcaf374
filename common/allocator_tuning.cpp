#include "common/allocator_tuning.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace mrcnn::common {

std::string KeepFreedMemoryForReuse() {
  if (const char* keep = std::getenv("MRCNN_MALLOC_DEFAULTS");
      keep != nullptr && std::strcmp(keep, "1") == 0) {
    return "";
  }
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  if (!mmap_set || !trim_set) {
    return "malloc: glibc refused the reuse settings; using its defaults";
  }
  return "";
}

}  // namespace mrcnn::common
