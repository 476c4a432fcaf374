#pragma once
// Process-wide glibc malloc settings for the tensor-heavy binaries (trainer, server).
//
// By default glibc serves every allocation above its (dynamic, at most 32 MiB) mmap
// threshold with a fresh mmap and unmaps it on free. A Mask R-CNN forward allocates and
// frees activation maps of tens of MiB hundreds of times per image, so each one comes back
// as zero-filled pages through page faults: perf showed ~19% of a CPU inference in the
// kernel (page faults, clearing pages). Keeping freed memory in the heap for reuse (mmap
// only above 1 GiB, trim only above 2 GiB of free top) removes most of that; the cost is
// that the process keeps its peak heap resident, which a server or a training job does
// anyway. MRCNN_MALLOC_DEFAULTS=1 in the environment keeps glibc's defaults (to compare,
// or to give memory back between requests).
//
// Call once at the start of main(), before any threads exist. Returns a line for the log
// saying what was set, or an empty string when nothing was.
#include <string>

namespace mrcnn::common {

std::string KeepFreedMemoryForReuse();

}  // namespace mrcnn::common
