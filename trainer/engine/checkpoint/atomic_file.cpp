#include "trainer/engine/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mrcnn::engine {
namespace {

[[noreturn]] void Fail(const std::filesystem::path& path, const char* call) {
  throw std::runtime_error(path.string() + ": " + call + " failed: " + std::strerror(errno));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::filesystem::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    Fd file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (file.fd < 0) Fail(tmp, "open");
    size_t written = 0;
    while (written < bytes.size()) {
      ssize_t n = ::write(file.fd, bytes.data() + written, bytes.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        int saved = errno;
        ::unlink(tmp.c_str());
        errno = saved;
        Fail(tmp, "write");
      }
      written += static_cast<size_t>(n);
    }
    if (::fsync(file.fd) != 0) Fail(tmp, "fsync");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    Fail(path, "rename");
  }
  Fd dir_fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir_fd.fd < 0) Fail(dir, "open");
  if (::fsync(dir_fd.fd) != 0) Fail(dir, "fsync");
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path.string() + ": read failed");
  return std::move(buffer).str();
}

}  // namespace mrcnn::engine
