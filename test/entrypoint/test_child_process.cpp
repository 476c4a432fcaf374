// A program the supervisor tests run as the "training" child. Behaviour comes
// from its argv, which the supervisor builds from hyperparameters as sorted
// "--key value" pairs (a leading "train" is skipped: the trainer's position).
//
//   --mode lines      --count N: N self-checking lines on stdout, a few on stderr
//   --mode exit       rank --fail-rank exits with --code after some stderr; others wait
//   --mode segv       rank --fail-rank dies of SIGSEGV; others wait
//   --mode trap       writes <marker-dir>/term.<rank> on SIGTERM, then exits 0
//   --mode ignore     ignores SIGTERM and waits forever
//   --mode stall      rank --stall-rank stops itself (SIGSTOP); rank --fail-rank waits until
//                     it has, then exits 1 naming it (as a peer of a silent rank does); others wait
//   --mode wait       writes its pid to <marker-dir>/pid.<rank> and waits forever
//   --mode grandchild forks a grandchild that writes its pid to <marker-dir>/grandchild.<rank>
//                     and sleeps; the child exits 0
//   --mode partial    prints a line and then text without a newline
//   --mode world      prints "world KEY=VALUE ..." for the launcher variables (and the socket
//                     interfaces NCCL and Gloo are told), and its argv
//   --mode stamp      writes CLOCK_REALTIME in ns to --stamp-file and exits (launch benchmark)
//   --mode flood      writes --megabytes MB of --line-bytes long lines to stdout, fast (throughput
//   benchmark)
// Waiting ranks write <marker-dir>/ready.<rank> once their handlers are in place.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>

namespace {

std::map<std::string, std::string> g_args;
std::string g_marker_dir;
int g_rank = 0;

std::string Arg(const std::string& key, const std::string& fallback = "") {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : it->second;
}

void WriteMarker(const std::string& name, const std::string& text) {
  if (g_marker_dir.empty())
    return;
  const std::string path = g_marker_dir + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  close(fd);
}

// FNV-1a over the line's text before the checksum field.
unsigned Checksum(const char* data, std::size_t size) {
  unsigned hash = 2166136261u;
  for (std::size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<unsigned char>(data[i])) * 16777619u;
  return hash;
}

void WaitForever() {
  WriteMarker("ready." + std::to_string(g_rank), "ready");
  for (;;)
    pause();
}

// Filled before the handler is installed: only async-signal-safe calls inside it.
char g_term_marker[4096];

void OnTerm(int) {
  const int fd = open(g_term_marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, "got SIGTERM", 11);
    (void)ignored;
    close(fd);
  }
  _exit(0);
}

int Lines() {
  const long count = std::atol(Arg("count", "1000").c_str());
  // Fully buffered with an odd buffer size, so lines are cut across writes.
  static char buffer[7919];
  std::setvbuf(stdout, buffer, _IOFBF, sizeof(buffer));
  std::string line;
  for (long seq = 0; seq < count; ++seq) {
    line = "rank " + std::to_string(g_rank) + " seq " + std::to_string(seq) + " ";
    line.append(static_cast<std::size_t>(seq * 7919 % 150), static_cast<char>('a' + seq % 26));
    const unsigned sum = Checksum(line.data(), line.size());
    char tail[32];
    std::snprintf(tail, sizeof(tail), " %08x\n", sum);
    line += tail;
    std::fwrite(line.data(), 1, line.size(), stdout);
    if (seq % 10000 == 0)
      std::fprintf(stderr, "rank %d progress %ld\n", g_rank, seq);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 1 && std::strcmp(argv[1], "train") == 0)
    first = 2;
  for (int i = first; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) == 0)
      key = key.substr(2);
    g_args[key] = argv[i + 1];
  }
  g_rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  g_marker_dir = Arg("marker-dir");
  const std::string mode = Arg("mode", "lines");
  std::snprintf(g_term_marker, sizeof(g_term_marker), "%s/term.%d",
                g_marker_dir.empty() ? "/dev/null/" : g_marker_dir.c_str(), g_rank);
  const int fail_rank = std::atoi(Arg("fail-rank", "0").c_str());

  if (mode == "lines")
    return Lines();
  if (mode == "exit" || mode == "segv") {
    if (g_rank != fail_rank) {
      std::signal(SIGTERM, OnTerm);
      WaitForever();
    }
    // Let the other ranks start, so the test sees them stopped, not never started.
    usleep(300 * 1000);
    std::fprintf(stderr, "loading data\nstep 1 loss 0.5\n");
    if (mode == "segv") {
      std::fflush(stderr);
      std::signal(SIGSEGV, SIG_DFL);  // die by the signal even where a sanitizer handles it
      std::raise(SIGSEGV);
    }
    std::fprintf(stderr, "fatal: the data loader broke on rank %d\n", g_rank);
    return std::atoi(Arg("code", "1").c_str());
  }
  if (mode == "trap") {
    std::signal(SIGTERM, OnTerm);
    WaitForever();
  }
  if (mode == "ignore") {
    std::signal(SIGTERM, SIG_IGN);
    WaitForever();
  }
  if (mode == "stall") {
    const int stall_rank = std::atoi(Arg("stall-rank", "1").c_str());
    const std::string stalled = g_marker_dir + "/stalled." + std::to_string(stall_rank);
    if (g_rank == stall_rank) {
      WriteMarker("stalled." + std::to_string(g_rank), "stopping");
      std::raise(SIGSTOP);
      return 0;
    }
    if (g_rank != fail_rank) {
      std::signal(SIGTERM, OnTerm);
      WaitForever();
    }
    for (int i = 0; i < 1000 && access(stalled.c_str(), F_OK) != 0; ++i)
      usleep(10 * 1000);
    usleep(300 * 1000);  // the stop has happened by now
    std::fprintf(stderr, "no data from rank %d: it is stuck or gone\n", stall_rank);
    return 1;
  }
  if (mode == "wait") {
    WriteMarker("pid." + std::to_string(g_rank), std::to_string(getpid()));
    for (;;)
      pause();
  }
  if (mode == "grandchild") {
    const pid_t pid = fork();
    if (pid == 0) {
      WriteMarker("grandchild." + std::to_string(g_rank), std::to_string(getpid()));
      for (;;)
        pause();
    }
    // Exit only once the grandchild has announced itself.
    const std::string marker = g_marker_dir + "/grandchild." + std::to_string(g_rank);
    while (access(marker.c_str(), F_OK) != 0)
      usleep(10 * 1000);
    std::printf("child exiting, grandchild %d keeps running\n", static_cast<int>(pid));
    return 0;
  }
  if (mode == "stamp") {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const long long ns = static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
    const std::string path = Arg("stamp-file");
    const std::string text = std::to_string(ns);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      return 1;
    ssize_t ignored = write(fd, text.data(), text.size());
    (void)ignored;
    close(fd);
    return 0;
  }
  if (mode == "flood") {
    const long long total = std::atoll(Arg("megabytes", "100").c_str()) * 1'000'000LL;
    const std::size_t line_bytes =
        static_cast<std::size_t>(std::atol(Arg("line-bytes", "100").c_str()));
    std::string block;
    for (long i = 0; block.size() < (1 << 16); ++i) {
      std::string line = "step " + std::to_string(i) + " loss 0.1234 ";
      line.resize(line_bytes - 1, 'x');
      block += line + "\n";
    }
    for (long long written = 0; written < total;) {
      const std::size_t chunk =
          static_cast<std::size_t>(std::min<long long>(total - written, block.size()));
      const ssize_t n = write(STDOUT_FILENO, block.data(), chunk);
      if (n <= 0)
        return 1;
      written += n;
    }
    return 0;
  }
  if (mode == "partial") {
    std::printf("a whole line\nthe last line has no newline");
    return 0;
  }
  if (mode == "world") {
    std::string line = "world";
    for (const char* key : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                            "MASTER_ADDR", "MASTER_PORT", "SM_CURRENT_HOST", "PYTHONUNBUFFERED",
                            "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
      const char* value = std::getenv(key);
      line += std::string(" ") + key + "=" + (value ? value : "<unset>");
    }
    std::printf("%s\n", line.c_str());
    std::string args = "argv";
    for (int i = 1; i < argc; ++i)
      args += std::string(" ") + argv[i];
    std::printf("%s\n", args.c_str());
    return 0;
  }
  std::fprintf(stderr, "unknown --mode %s\n", mode.c_str());
  return 64;
}
