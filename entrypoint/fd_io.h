#pragma once
// Blocking output on file descriptors that survives EINTR and partial writes.
#include <sys/uio.h>

#include <string_view>

namespace mrcnn::entrypoint {

// Writes every byte of `data` to `fd` with as few write() calls as the kernel
// allows (one, unless the destination is full or the data exceeds what one call
// takes). Returns false when the destination is gone (EPIPE, EBADF, ...): the
// caller keeps running and the output is dropped, because a supervisor must not
// die because nobody reads its logs.
bool WriteAll(int fd, std::string_view data);

// Same for a gather list; `iov` is modified while the write progresses.
bool WriteAllV(int fd, iovec* iov, int count);

// A line of our own ("[entrypoint] ...\n") on stderr, one write.
void LogLine(std::string_view message);

}  // namespace mrcnn::entrypoint
