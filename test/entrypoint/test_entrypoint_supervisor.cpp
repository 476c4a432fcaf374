// The real entrypoint binary supervising real child processes
// (test_child_process): output forwarding, failures, signals, reaping.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "process_harness.h"

using namespace mrcnn::test;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start) + "<no newline>");
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

unsigned Checksum(const char* data, std::size_t size) {
  unsigned hash = 2166136261u;
  for (std::size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<unsigned char>(data[i])) * 16777619u;
  return hash;
}

// "rank R seq N <payload> <checksum>": returns false unless the line is intact.
bool ParseLine(const std::string& line, int& rank, long& seq) {
  if (line.size() < 10)
    return false;
  const std::size_t last_space = line.rfind(' ');
  if (last_space == std::string::npos || line.size() - last_space != 9)
    return false;
  unsigned sum = 0;
  const char* hex = line.data() + last_space + 1;
  if (std::from_chars(hex, hex + 8, sum, 16).ec != std::errc{})
    return false;
  if (sum != Checksum(line.data(), last_space))
    return false;
  return std::sscanf(line.c_str(), "rank %d seq %ld ", &rank, &seq) == 2;
}

std::vector<std::string> Train(const JobTree& job, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--base-dir", job.base.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("100k lines from each of 8 processes arrive whole, in order and exactly once") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  constexpr long kLines = 100'000;
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "lines"}, {"count", kLines}});
  const Finished run = RunEntrypoint(Train(job, {"--nproc-per-node", "8"}), {}, dir.path());
  REQUIRE(run.exit_code == 0);
  WARN("8 x 100k lines (" << run.out.size() / 1e6 << " MB) forwarded in " << run.elapsed.count()
                          << " ms");

  std::vector<long> next_seq(8, 0);
  long bad = 0;
  for (const auto& line : SplitLines(run.out)) {
    int rank = -1;
    long seq = -1;
    if (!ParseLine(line, rank, seq) || rank < 0 || rank >= 8 || seq != next_seq[rank]) {
      if (++bad <= 3)
        UNSCOPED_INFO("bad line: " << line.substr(0, 200));
      continue;
    }
    ++next_seq[rank];
  }
  CHECK(bad == 0);
  for (int rank = 0; rank < 8; ++rank)
    CHECK(next_seq[rank] == kLines);
  // stderr lines of the children arrived whole too, next to our own log lines.
  int progress = 0;
  for (const auto& line : SplitLines(run.err)) {
    if (line.rfind("[entrypoint] ", 0) == 0)
      continue;
    int rank = -1;
    long seq = -1;
    CHECK(std::sscanf(line.c_str(), "rank %d progress %ld", &rank, &seq) == 2);
    ++progress;
  }
  CHECK(progress == 8 * 10);
  CHECK_FALSE(std::filesystem::exists(job.Failure()));
}

TEST_CASE("The rank prefix option marks every rank but 0") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "lines"}, {"count", 500}});
  const Finished run =
      RunEntrypoint(Train(job, {"--nproc-per-node", "2", "--rank-prefix"}), {}, dir.path());
  REQUIRE(run.exit_code == 0);
  int rank0 = 0;
  int rank1 = 0;
  for (const auto& line : SplitLines(run.out)) {
    int rank = -1;
    long seq = -1;
    if (line.rfind("[rank 1] ", 0) == 0 && ParseLine(line.substr(9), rank, seq) && rank == 1) {
      ++rank1;
    } else if (ParseLine(line, rank, seq) && rank == 0) {
      ++rank0;
    } else {
      FAIL_CHECK("unexpected line: " << line.substr(0, 120));
    }
  }
  CHECK(rank0 == 500);
  CHECK(rank1 == 500);
}

TEST_CASE("A child exiting with a code stops the others, its code and stderr make the report") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"},
                            {"mode", "exit"},
                            {"fail-rank", 2},
                            {"code", 7},
                            {"marker-dir", job.markers.string()}});
  const Finished run =
      RunEntrypoint(Train(job, {"--nproc-per-node", "4", "--grace-period", "5"}), {}, dir.path());
  CHECK(run.exit_code == 7);
  const std::string failure = ReadFile(job.Failure());
  INFO("failure file:\n" << failure << "\nstderr:\n" << run.err);
  CHECK(failure.rfind(
            "rank 2 (local rank 2) on algo-1 exited with code 7: fatal: the data loader broke on "
            "rank 2\n",
            0) == 0);
  CHECK(failure.find("step 1 loss 0.5") != std::string::npos);
  CHECK(failure.size() <= 1024);
  for (int rank : {0, 1, 3})
    CHECK(std::filesystem::exists(job.markers / ("term." + std::to_string(rank))));
  CHECK(run.elapsed < seconds(5));  // the others stopped on SIGTERM, not after the grace period
}

TEST_CASE("A segfaulting child gives 128+11 and names SIGSEGV") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"},
                            {"mode", "segv"},
                            {"fail-rank", 1},
                            {"marker-dir", job.markers.string()}});
  const Finished run = RunEntrypoint(Train(job, {"--nproc-per-node", "2"}), {}, dir.path());
  CHECK(run.exit_code == 128 + SIGSEGV);
  const std::string failure = ReadFile(job.Failure());
  INFO(failure);
  CHECK(failure.rfind("rank 1 (local rank 1) on algo-1 was killed by signal SIGSEGV (11)", 0) == 0);
  CHECK(std::filesystem::exists(job.markers / "term.0"));
}

TEST_CASE("An existing failure file is never overwritten") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "exit"}, {"code", 9}});
  { std::ofstream(job.Failure()) << "the user's own reason\n"; }
  const Finished run = RunEntrypoint(Train(job, {}), {}, dir.path());
  CHECK(run.exit_code == 9);
  CHECK(ReadFile(job.Failure()) == "the user's own reason\n");
}

TEST_CASE("SIGTERM to the supervisor reaches every child at once") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters(
      {{"sagemaker_program", "child"}, {"mode", "trap"}, {"marker-dir", job.markers.string()}});
  EntrypointRun run(Train(job, {"--nproc-per-node", "3"}), {}, dir.path());
  for (int rank = 0; rank < 3; ++rank) {
    REQUIRE(WaitForFile(job.markers / ("ready." + std::to_string(rank)), seconds(10)));
  }
  run.Signal(SIGTERM);
  const Finished done = run.Wait();
  INFO(done.err);
  CHECK(done.exit_code == 0);  // every child saved its work and exited 0
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(ReadFile(job.markers / ("term." + std::to_string(rank))) == "got SIGTERM");
  }
  CHECK_FALSE(std::filesystem::exists(job.Failure()));
}

TEST_CASE(
    "Under torchrun, a signal named in TORCHELASTIC_SIGNALS_TO_HANDLE stops as SIGTERM does") {
  // torchrun's agent sends its workers the signal it got (SIGQUIT among its defaults); the
  // supervisor must not die of SIGQUIT's default action and orphan the children.
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters(
      {{"sagemaker_program", "child"}, {"mode", "trap"}, {"marker-dir", job.markers.string()}});
  EntrypointRun run(Train(job, {"--nproc-per-node", "2"}),
                    {{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"}},
                    dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(WaitForFile(job.markers / ("ready." + std::to_string(rank)), seconds(10)));
  }
  run.Signal(SIGQUIT);
  const Finished done = run.Wait();
  INFO(done.err);
  CHECK(done.exit_code == 0);  // every child saved its work and exited 0
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(ReadFile(job.markers / ("term." + std::to_string(rank))) == "got SIGTERM");
  }
  CHECK(done.err.find("received SIGQUIT") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(job.Failure()));
}

TEST_CASE("Under torchrun, the root cause also goes to TORCHELASTIC_ERROR_FILE as torch's JSON") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"},
                            {"mode", "exit"},
                            {"fail-rank", 1},
                            {"code", 7},
                            {"marker-dir", job.markers.string()}});
  const auto error_file = dir.path() / "torchelastic" / "attempt_0" / "0" / "error.json";
  const Finished run =
      RunEntrypoint(Train(job, {"--nproc-per-node", "2", "--grace-period", "5"}),
                    {{"TORCHELASTIC_ERROR_FILE", error_file.string()}}, dir.path());
  CHECK(run.exit_code == 7);
  INFO(run.err);
  REQUIRE(std::filesystem::exists(error_file));
  const auto doc = nlohmann::json::parse(ReadFile(error_file));
  CHECK(doc.at("message").at("message") ==
        "rank 1 (local rank 1) on algo-1 exited with code 7: fatal: the data loader broke on "
        "rank 1");
  CHECK(doc.at("message").at("extraInfo").at("py_callstack") == ReadFile(job.Failure()));
  const long stamp =
      std::stol(doc.at("message").at("extraInfo").at("timestamp").get<std::string>());
  CHECK(std::abs(stamp - static_cast<long>(std::time(nullptr))) < 60);
}

TEST_CASE("A configuration error under torchrun reaches TORCHELASTIC_ERROR_FILE too") {
  TempDir dir;
  JobTree job(dir.path());
  const auto error_file = dir.path() / "error.json";
  const Finished run = RunEntrypoint(Train(job, {}),
                                     {{"TORCHELASTIC_ERROR_FILE", error_file.string()},
                                      {"RANK", "0"},
                                      {"LOCAL_RANK", "0"},
                                      {"WORLD_SIZE", "2"},
                                      {"GROUP_RANK", "0"},
                                      {"LOCAL_WORLD_SIZE", "3"}},
                                     dir.path());
  CHECK(run.exit_code == 2);
  INFO(run.err);
  REQUIRE(std::filesystem::exists(error_file));
  const auto doc = nlohmann::json::parse(ReadFile(error_file));
  CHECK(doc.at("message").at("message").get<std::string>().find("LOCAL_WORLD_SIZE") !=
        std::string::npos);
}

TEST_CASE("A child ignoring SIGTERM is killed after the grace period") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters(
      {{"sagemaker_program", "child"}, {"mode", "ignore"}, {"marker-dir", job.markers.string()}});
  EntrypointRun run(Train(job, {"--nproc-per-node", "2", "--grace-period", "1"}), {}, dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(WaitForFile(job.markers / ("ready." + std::to_string(rank)), seconds(10)));
  }
  const auto signalled = std::chrono::steady_clock::now();
  run.Signal(SIGTERM);
  const Finished done = run.Wait();
  const auto after = std::chrono::steady_clock::now() - signalled;
  INFO(done.err);
  CHECK(done.exit_code == 128 + SIGTERM);
  CHECK(after >= milliseconds(950));
  CHECK(after < seconds(6));
  CHECK(done.err.find("SIGKILL") != std::string::npos);
}

TEST_CASE("A stopped child is killed at once when its peer fails, and named in the report") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"},
                            {"mode", "stall"},
                            {"stall-rank", 1},
                            {"fail-rank", 0},
                            {"marker-dir", job.markers.string()}});
  // A long grace: the stopped child cannot act on SIGTERM, so waiting it out would be useless.
  const Finished run =
      RunEntrypoint(Train(job, {"--nproc-per-node", "3", "--grace-period", "60"}), {}, dir.path());
  const std::string failure = ReadFile(job.Failure());
  INFO("failure file:\n" << failure << "\nstderr:\n" << run.err);
  CHECK(run.exit_code == 1);
  CHECK(run.elapsed < seconds(10));
  CHECK(failure.rfind("rank 0 (local rank 0) on algo-1 exited with code 1: no data from rank 1: "
                      "it is stuck or gone\n"
                      "rank 1 (local rank 1) on algo-1 was stopped by signal SIGSTOP (19) and did "
                      "not continue; it was killed\n",
                      0) == 0);
  CHECK(run.err.find("rank 1 (local rank 1, pid") != std::string::npos);
  CHECK(std::filesystem::exists(job.markers / "term.2"));  // the running one got SIGTERM
}

TEST_CASE("Children die with a supervisor that is killed") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters(
      {{"sagemaker_program", "child"}, {"mode", "wait"}, {"marker-dir", job.markers.string()}});
  EntrypointRun run(Train(job, {"--nproc-per-node", "2"}), {}, dir.path());
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const auto marker = job.markers / ("pid." + std::to_string(rank));
    REQUIRE(WaitForFile(marker, seconds(10)));
    std::string text;
    for (int i = 0; i < 100 && text.empty(); ++i) {
      text = ReadFile(marker);  // written right after the file appears
      std::this_thread::sleep_for(milliseconds(10));
    }
    children.push_back(std::stoi(text));
  }
  run.Signal(SIGKILL);
  run.Wait();
  // Reparented to init, which reaps them: gone within moments, never left running.
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  const auto gone = [](pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; };
  while (!std::all_of(children.begin(), children.end(), gone) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  for (const pid_t pid : children) {
    CHECK(gone(pid));
    if (!gone(pid))
      kill(pid, SIGKILL);
  }
}

TEST_CASE("A grandchild left behind by an exiting child is killed and reaped") {
  // Become a subreaper ourselves: anything the supervisor fails to reap would
  // be handed to this test process instead of init, where we can see it.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"},
                            {"mode", "grandchild"},
                            {"marker-dir", job.markers.string()}});
  const Finished run = RunEntrypoint(Train(job, {"--nproc-per-node", "2"}), {}, dir.path());
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.elapsed < seconds(5));
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t grandchild =
        std::stoi(ReadFile(job.markers / ("grandchild." + std::to_string(rank))));
    const bool alive = kill(grandchild, 0) == 0;
    const int error = alive ? 0 : errno;
    CHECK_FALSE(alive);
    CHECK(error == ESRCH);
    if (alive) {
      kill(grandchild, SIGKILL);
      waitpid(grandchild, nullptr, 0);
    }
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

TEST_CASE("A last line without a newline is delivered") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "partial"}});
  const Finished run = RunEntrypoint(Train(job, {}), {}, dir.path());
  CHECK(run.exit_code == 0);
  CHECK(run.out == "a whole line\nthe last line has no newline\n");
}
