#include "entrypoint/fd_io.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace mrcnn::entrypoint {

bool WriteAll(int fd, std::string_view data) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  return WriteAllV(fd, &iov, 1);
}

bool WriteAllV(int fd, iovec* iov, int count) {
  while (count > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --count;
      continue;
    }
    const ssize_t written = writev(fd, iov, count);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    auto left = static_cast<size_t>(written);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

void LogLine(std::string_view message) {
  std::string line;
  line.reserve(message.size() + 16);
  line += "[entrypoint] ";
  line += message;
  line += '\n';
  WriteAll(STDERR_FILENO, line);
}

}  // namespace mrcnn::entrypoint
