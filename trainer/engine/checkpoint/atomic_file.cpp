#include "trainer/engine/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mrcnn::engine {
namespace {

namespace fs = std::filesystem;

// "<path>: write failed: No space left on device (ENOSPC)": the symbolic name too, as
// people search for it.
[[noreturn]] void Fail(const fs::path& path, const char* call) {
  const int error = errno;
  std::string message = path.string();
  message.append(": ").append(call).append(" failed: ").append(std::strerror(error));
  if (const char* name = strerrorname_np(error))
    message.append(" (").append(name).append(")");
  throw std::runtime_error(message);
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

fs::path DirOf(const fs::path& path) {
  return path.has_parent_path() ? path.parent_path() : fs::path(".");
}

std::optional<dev_t> DeviceOf(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
  return st.st_dev;
}

// The staging directory when it exists or can be made on `dir`'s filesystem; else `dir`.
fs::path TemporaryDirFor(const fs::path& dir) {
  const fs::path staging = StagingDirFor(dir);
  std::error_code ec;
  fs::create_directories(staging, ec);
  const auto dir_dev = DeviceOf(dir), staging_dev = DeviceOf(staging);
  if (ec || !dir_dev || !staging_dev || *dir_dev != *staging_dev)
    return dir;
  return staging;
}

void WriteAll(const fs::path& tmp, std::string_view bytes) {
  Fd file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0)
    Fail(tmp, "open");
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(file.fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int saved = errno;
      ::unlink(tmp.c_str());
      errno = saved;
      Fail(tmp, "write");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(file.fd) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    Fail(tmp, "fsync");
  }
}

bool WriterIsGone(pid_t pid) {
  if (pid == ::getpid())
    return true;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

void RemoveStaleIn(const fs::path& dir, const std::string& prefix, std::vector<fs::path>& removed) {
  static const std::regex pattern(R"(.*\.tmp([0-9]+))");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || name.rfind(prefix, 0) != 0 ||
        !std::regex_match(name, m, pattern))
      continue;
    const auto pid = static_cast<pid_t>(std::stoll(m[1]));
    if (WriterIsGone(pid) && ::unlink(entry.path().c_str()) == 0)
      removed.push_back(entry.path());
  }
}

}  // namespace

fs::path StagingDirFor(const fs::path& dir) {
  const fs::path absolute = fs::absolute(dir).lexically_normal();
  const fs::path clean = absolute.filename().empty() ? absolute.parent_path() : absolute;
  std::string name = clean.filename().string();
  name.insert(0, 1, '.');
  name.append(".partial");
  return clean.parent_path() / name;
}

void WriteFileAtomically(const fs::path& path, std::string_view bytes) {
  const fs::path dir = DirOf(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    errno = ENOENT;
    Fail(dir, "opendir");
  }
  const fs::path tmp =
      TemporaryDirFor(dir) / (path.filename().string() + ".tmp" + std::to_string(::getpid()));
  WriteAll(tmp, bytes);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    Fail(path, "rename");
  }
  Fd dir_fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir_fd.fd < 0)
    Fail(dir, "open");
  if (::fsync(dir_fd.fd) != 0)
    Fail(dir, "fsync");
}

std::vector<fs::path> RemoveStaleTemporaries(const fs::path& dir, const std::string& name_prefix) {
  std::vector<fs::path> removed;
  RemoveStaleIn(dir, name_prefix, removed);
  RemoveStaleIn(StagingDirFor(dir), name_prefix, removed);
  return removed;
}

std::string ReadWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path.string() + ": cannot open for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    throw std::runtime_error(path.string() + ": read failed");
  return std::move(buffer).str();
}

}  // namespace mrcnn::engine
