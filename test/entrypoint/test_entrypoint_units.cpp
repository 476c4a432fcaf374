// The supervisor's pieces on their own: line reassembly, stderr tails, the
// failure report, exit statuses.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "entrypoint/exit_status.h"
#include "entrypoint/failure_report.h"
#include "entrypoint/forward_lines.h"
#include "entrypoint/peer_wait.h"
#include "entrypoint/signals_to_handle.h"
#include "entrypoint/torchelastic_error_file.h"
#include "process_harness.h"

using namespace mrcnn::entrypoint;

namespace {

// Captures what ForwardLines writes, and how many write calls it took, through a pipe.
struct Capture {
  int fds[2];
  Capture() {
    REQUIRE(pipe(fds) == 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  }
  ~Capture() {
    close(fds[0]);
    close(fds[1]);
  }
  std::string Drain() {
    std::string text;
    char buffer[65536];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof(buffer))) > 0)
      text.append(buffer, static_cast<size_t>(n));
    return text;
  }
};

}  // namespace

TEST_CASE("ForwardLines holds a partial line until its newline arrives") {
  Capture capture;
  ForwardLines forward(capture.fds[1], "");
  forward.Consume("first li");
  CHECK(capture.Drain().empty());
  forward.Consume("ne\nsecond");
  CHECK(capture.Drain() == "first line\n");
  forward.Consume(" line\nthird\nfour");
  CHECK(capture.Drain() == "second line\nthird\n");
  forward.Finish();
  CHECK(capture.Drain() == "four\n");
  CHECK(forward.lines_written() == 4);
}

TEST_CASE("ForwardLines puts the prefix before every line, including pieces of long ones") {
  Capture capture;
  ForwardLines forward(capture.fds[1], "[rank 3] ", 8);
  forward.Consume("a\nbb\n");
  CHECK(capture.Drain() == "[rank 3] a\n[rank 3] bb\n");
  forward.Consume("0123456789abcdefXY");
  CHECK(capture.Drain() == "[rank 3] 01234567\n[rank 3] 89abcdef\n");
  forward.Consume("Z\n");
  CHECK(capture.Drain() == "[rank 3] XYZ\n");
}

TEST_CASE("ForwardLines cuts a line longer than 64 KiB into 64 KiB lines and loses nothing") {
  Capture capture;
  ForwardLines forward(capture.fds[1], "");
  const std::string huge(200 * 1024, 'x');
  forward.Consume(huge);
  forward.Consume("\n");
  const std::string out = capture.Drain();
  CHECK(out.size() == huge.size() + 4);  // 3 cut points + the real newline
  CHECK(out.substr(0, 65536) == std::string(65536, 'x'));
  CHECK(out[65536] == '\n');
}

TEST_CASE("ForwardLines at EOF with nothing pending writes nothing") {
  Capture capture;
  ForwardLines forward(capture.fds[1], "");
  forward.Consume("done\n");
  forward.Finish();
  CHECK(capture.Drain() == "done\n");
}

TEST_CASE("TailLines keeps the last whole lines within its budget") {
  TailLines tail(32);
  for (int i = 0; i < 100; ++i)
    tail.Consume("line " + std::to_string(i) + "\n");
  const std::string text = tail.Text();
  CHECK(text.size() <= 32);
  CHECK(text.rfind("line 99\n") == text.size() - 8);
  CHECK(text.rfind("line ", 0) == 0);  // starts at a line boundary
}

TEST_CASE("ExitStatus decodes codes and signals like a shell") {
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  const ExitStatus segv = ExitStatus::FromWaitStatus(status);
  CHECK(segv.signaled);
  CHECK(segv.ShellCode() == 128 + SIGSEGV);
  CHECK(segv.Describe() == "was killed by signal SIGSEGV (11)");
  const ExitStatus code = ExitStatus::FromWaitStatus(7 << 8);
  CHECK(code.ShellCode() == 7);
  CHECK(code.Describe() == "exited with code 7");
  CHECK(SignalName(SIGTERM) == "SIGTERM");
}

TEST_CASE("The failure report leads with the root cause and stays within 1024 bytes") {
  std::string stderr_text;
  for (int i = 0; i < 200; ++i)
    stderr_text += "context line " + std::to_string(i) + "\n";
  stderr_text += "ValueError: bad annotation in image 17\n";
  ExitStatus status;
  status.code = 3;
  const std::string report =
      FormatChildFailure(DescribeRank("algo-2", 5, 1), status, stderr_text,
                         {"rank 4 (local rank 0) on algo-2 was stopped by signal SIGSTOP (19)"});
  CHECK(report.size() <= kFailureReportLimit);
  CHECK(report.rfind("rank 5 (local rank 1) on algo-2 exited with code 3: ValueError: bad "
                     "annotation in image 17\n"
                     "rank 4 (local rank 0) on algo-2 was stopped by signal SIGSTOP (19)\n"
                     "stderr tail:\ncontext line",
                     0) == 0);
  CHECK(report.find("context line 199\nValueError") != std::string::npos);
}

TEST_CASE("The failure report is cut at a UTF-8 character boundary") {
  std::string text(1023, 'a');
  text += "\xc3\xa9";  // é straddles byte 1024
  const std::string limited = LimitReport(text);
  CHECK(limited.size() == 1023);
}

TEST_CASE("WriteFailureOnce never replaces an existing report") {
  mrcnn::test::TempDir dir;
  const auto file = dir.path() / "output" / "failure";
  CHECK(WriteFailureOnce(file, "first\n"));
  CHECK_FALSE(WriteFailureOnce(file, "second\n"));
  CHECK(mrcnn::test::ReadFile(file) == "first\n");
}

TEST_CASE("The torchrun error file is torch's @record JSON with the report as its traceback") {
  const std::string report =
      "rank 1 (local rank 1) on box exited with code 2: config error: bad key\nstderr tail:\nx\n";
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1764000000));
  const auto doc = nlohmann::json::parse(TorchelasticErrorJson(report, when));
  // What torch.distributed.elastic's ProcessFailure reads: message.message,
  // message.extraInfo.timestamp (a decimal string) and py_callstack (shown as the traceback).
  CHECK(doc.at("message").at("message") ==
        "rank 1 (local rank 1) on box exited with code 2: config error: bad key");
  CHECK(doc.at("message").at("extraInfo").at("py_callstack") == report);
  CHECK(doc.at("message").at("extraInfo").at("timestamp") == "1764000000");
  // Bytes that are not UTF-8 (a child's raw stderr) must not make the file unreadable.
  const auto mangled = nlohmann::json::parse(TorchelasticErrorJson("bad \xff byte\n", when));
  CHECK(mangled.at("message").at("message") == "bad \xef\xbf\xbd byte");

  mrcnn::test::TempDir dir;
  const auto file = dir.path() / "attempt_0" / "1" / "error.json";
  CHECK(WriteTorchelasticErrorFile(file, report, when));
  CHECK(nlohmann::json::parse(mrcnn::test::ReadFile(file)) == doc);
  // A Python child under @record wrote its own: that one is the better root cause.
  CHECK_FALSE(WriteTorchelasticErrorFile(file, "other\n", when));
  CHECK(nlohmann::json::parse(mrcnn::test::ReadFile(file)) == doc);
}

TEST_CASE("TORCHELASTIC_SIGNALS_TO_HANDLE: torch's names, the defaults always, bad names skipped") {
  const auto torch_default = ParseSignalsToHandle("SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  CHECK(torch_default.extra == std::vector<int>{SIGQUIT});
  CHECK(torch_default.warnings.empty());
  const auto spaced = ParseSignalsToHandle(" SIGUSR1 , SIGUSR2,SIGUSR1,");
  CHECK(spaced.extra == std::vector<int>{SIGUSR1, SIGUSR2});
  CHECK(ParseSignalsToHandle("").extra.empty());
  const auto bad = ParseSignalsToHandle("SIGBOGUS,TERM,SIGKILL,SIGCHLD,SIGQUIT");
  CHECK(bad.extra == std::vector<int>{SIGQUIT});
  REQUIRE(bad.warnings.size() == 4);
  CHECK(bad.warnings[0].find("\"SIGBOGUS\" is not a signal name") != std::string::npos);
  CHECK(bad.warnings[1].find("\"TERM\"") != std::string::npos);
  CHECK(bad.warnings[2].find("SIGKILL cannot be caught") != std::string::npos);
  CHECK(SignalForwardedForStop(SIGQUIT) == SIGTERM);
  CHECK(SignalForwardedForStop(SIGUSR1) == SIGTERM);
  CHECK(SignalForwardedForStop(SIGINT) == SIGINT);
  CHECK(SignalForwardedForStop(SIGHUP) == SIGHUP);
}

TEST_CASE("A worker that disagrees with the master about the node count fails at once") {
  using namespace std::chrono;
  // Port 0: the kernel picks a free loopback port; read it back.
  RendezvousListener listener("127.0.0.1", 0, 3);
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  REQUIRE(getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
  PeerWaitPlan plan;
  plan.master_addr = "127.0.0.1";
  plan.rendezvous_port = ntohs(address.sin_port);
  plan.node_rank = 1;
  plan.nnodes = 2;  // the master says 3
  std::atomic<bool> done{false};
  std::thread master([&] {
    while (!done) {
      listener.AnswerPending();
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  const Sleeper no_sleep = [](milliseconds) { return true; };
  const auto start = steady_clock::now();
  CHECK_THROWS_WITH(CheckInWithMaster(plan, steady_clock::now() + seconds(20), no_sleep),
                    Catch::Contains("runs a job of 3 nodes, this node was configured for 2"));
  CHECK(steady_clock::now() - start < seconds(5));
  done = true;
  master.join();
  CHECK(listener.checked_in().empty());  // a mismatched node does not count as present
}

TEST_CASE("The master's wait for workers is bounded and names who is missing") {
  using namespace std::chrono;
  RendezvousListener listener("127.0.0.1", 0, 3);
  PeerWaitPlan plan;
  plan.nnodes = 3;
  const Sleeper no_sleep = [](milliseconds) { return true; };
  CHECK_THROWS_WITH(
      WaitForWorkers(listener, plan, steady_clock::now() + milliseconds(300), no_sleep),
      Catch::Contains("nodes 1, 2 have not checked in"));
}
