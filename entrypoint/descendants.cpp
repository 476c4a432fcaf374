#include "entrypoint/descendants.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <string>

namespace mrcnn::entrypoint {

bool BecomeSubreaper() {
  if (getpid() == 1)
    return true;
  return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
}

namespace {

// Parent pid and state from /proc/<pid>/stat ("pid (comm) S ppid ..."); comm may
// contain spaces and parentheses, so parse from the last ')'.
bool ReadStat(pid_t pid, pid_t& parent, char& state) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buffer[512];
  const ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  if (n <= 0)
    return false;
  const std::string_view text(buffer, static_cast<std::size_t>(n));
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos || close_paren + 4 >= text.size())
    return false;
  state = text[close_paren + 2];
  const char* first = text.data() + close_paren + 4;
  const char* last = text.data() + text.size();
  int value = 0;
  if (std::from_chars(first, last, value).ec != std::errc{})
    return false;
  parent = value;
  return true;
}

}  // namespace

std::vector<pid_t> LiveChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr)
    return children;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    const char* name = entry->d_name;
    const char* end = name + std::strlen(name);
    if (std::from_chars(name, end, pid).ptr != end || pid <= 0)
      continue;
    pid_t ppid = 0;
    char state = '?';
    if (ReadStat(pid, ppid, state) && ppid == parent && state != 'Z' && state != 'X') {
      children.push_back(pid);
    }
  }
  closedir(proc);
  return children;
}

}  // namespace mrcnn::entrypoint
