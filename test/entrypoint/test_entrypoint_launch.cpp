// What the entrypoint starts and with which world: user programs (.py, .sh,
// executables), the default trainer, multi-host jobs on loopback, `env`,
// `serve`, and configuration errors.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "process_harness.h"

using namespace mrcnn::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> Train(const JobTree& job, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", "--base-dir", job.base.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0)
      lines.push_back(line);
  }
  return lines;
}

// "world RANK=1 LOCAL_RANK=1 ..." -> map
std::map<std::string, std::string> ParseWorld(const std::string& line) {
  std::map<std::string, std::string> values;
  std::istringstream in(line.substr(6));
  for (std::string item; in >> item;) {
    const auto eq = item.find('=');
    values[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return values;
}

// A loopback port nobody listens on now (and the next one, for the rendezvous).
int FreePortPair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const int port = ntohs(addr.sin_port);
    close(fd);
    if (port >= 65535)
      continue;
    const int probe = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons(static_cast<uint16_t>(port + 1));
    const bool next_free = bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(probe);
    if (next_free)
      return port;
  }
  FAIL("no free loopback port pair");
  return 0;
}

}  // namespace

TEST_CASE("A .py program runs with python3 and sorted --key value arguments, one argv entry each") {
  TempDir dir;
  JobTree job(dir.path());
  job.WriteCode(
      "train.py",
      "import json, os, sys\n"
      "print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(),\n"
      "  'entry': os.environ.get('SM_USER_ENTRY_POINT'), 'rank': os.environ.get('RANK'),\n"
      "  'unbuffered': os.environ.get('PYTHONUNBUFFERED')}))\n",
      false);
  job.WriteHyperparameters({{"sagemaker_program", "train.py"},
                            {"lr", 0.01},
                            {"batch-size", 4},
                            {"name", "run one; rm -rf /"},
                            {"flags", {1, 2}}});
  const Finished run = RunEntrypoint(Train(job, {"--", "--extra", "x"}), {}, dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto result = nlohmann::json::parse(run.out);
  // Lists as the public toolkit encodes them (Python's json.dumps separators).
  CHECK(result["argv"] == nlohmann::json({"--batch-size", "4", "--flags", "[1, 2]", "--lr", "0.01",
                                          "--name", "run one; rm -rf /", "--extra", "x"}));
  CHECK(fs::equivalent(result["cwd"].get<std::string>(), job.base / "code"));
  CHECK(result["entry"] == "train.py");
  CHECK(result["rank"] == "0");
  CHECK(result["unbuffered"] == "1");
}

TEST_CASE("A .sh program runs with /bin/sh, named by SAGEMAKER_PROGRAM") {
  TempDir dir;
  JobTree job(dir.path());
  job.WriteCode("run.sh", "for a in \"$@\"; do echo \"arg:$a\"; done\necho \"world $WORLD_SIZE\"\n",
                false);
  job.WriteHyperparameters({{"epochs", 2}, {"a-b", "x y"}});
  const Finished run = RunEntrypoint(Train(job, {"--nproc-per-node", "1"}),
                                     {{"SAGEMAKER_PROGRAM", "run.sh"}}, dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out == "arg:--a-b\narg:x y\narg:--epochs\narg:2\nworld 1\n");
}

TEST_CASE("An executable program runs directly, a missing one is a configuration error") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  SECTION("present") {
    job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "world"}});
    const Finished run = RunEntrypoint(Train(job), {}, dir.path());
    REQUIRE(run.exit_code == 0);
    CHECK(LinesStartingWith(run.out, "argv") == std::vector<std::string>{"argv --mode world"});
  }
  SECTION("missing") {
    job.WriteHyperparameters({{"sagemaker_program", "nope.py"}});
    const Finished run = RunEntrypoint(Train(job), {}, dir.path());
    CHECK(run.exit_code == 2);
    const std::string failure = ReadFile(job.Failure());
    CHECK(failure.find("sagemaker_program") != std::string::npos);
    CHECK(failure.find("nope.py") != std::string::npos);
  }
}

TEST_CASE("A program that cannot be started gives 127 and says why") {
  TempDir dir;
  JobTree job(dir.path());
  job.WriteCode("train.py", "print('never runs')\n", false);
  job.WriteHyperparameters({{"sagemaker_program", "train.py"}});
  const Finished run = RunEntrypoint(Train(job, {"--nproc-per-node", "2"}),
                                     {{"MRCNN_PYTHON", "/nonexistent/python3"}}, dir.path());
  CHECK(run.exit_code == 127);
  const std::string failure = ReadFile(job.Failure());
  INFO(failure);
  CHECK(failure.rfind("rank 0 (local rank 0) on algo-1 could not be started: cannot start "
                      "\"/nonexistent/python3\"",
                      0) == 0);
}

TEST_CASE("Malformed configuration exits 2 and says which file is wrong") {
  TempDir dir;
  JobTree job(dir.path());
  { std::ofstream(job.base / "input/config/hyperparameters.json") << "{\"lr\": "; }
  const Finished run = RunEntrypoint(Train(job), {}, dir.path());
  CHECK(run.exit_code == 2);
  CHECK(ReadFile(job.Failure()).find("hyperparameters.json") != std::string::npos);
  CHECK(run.err.find("hyperparameters.json") != std::string::npos);
}

TEST_CASE(
    "Without sagemaker_program the trainer next to the entrypoint runs as `trainer train ...`") {
  TempDir dir;
  JobTree job(dir.path());
  const fs::path bin = dir.path() / "bin";
  fs::create_directories(bin);
  fs::copy_file(EntrypointBinary(), bin / "entrypoint");
  fs::permissions(bin / "entrypoint", fs::perms::owner_all);
  job.WriteHyperparameters({{"mode", "world"}, {"lr", 0.1}});
  SECTION("present") {
    fs::create_symlink(ChildBinary(), bin / "trainer");
    const Finished run = RunEntrypoint(Train(job), {}, dir.path(), std::chrono::seconds(30),
                                       (bin / "entrypoint").string());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(LinesStartingWith(run.out, "argv") ==
          std::vector<std::string>{"argv train --lr 0.1 --mode world"});
  }
  SECTION("absent") {
    const Finished run = RunEntrypoint(Train(job), {}, dir.path(), std::chrono::seconds(30),
                                       (bin / "entrypoint").string());
    CHECK(run.exit_code == 2);
    CHECK(ReadFile(job.Failure()).find("trainer") != std::string::npos);
  }
}

TEST_CASE("With no argument at all the entrypoint runs `train` and says so") {
  // The SageMaker Python SDK v3's local mode starts the training image without a command.
  TempDir dir;
  JobTree job(dir.path());
  const fs::path bin = dir.path() / "bin";
  fs::create_directories(bin);
  fs::copy_file(EntrypointBinary(), bin / "entrypoint");
  fs::permissions(bin / "entrypoint", fs::perms::owner_all);
  fs::create_symlink(ChildBinary(), bin / "trainer");
  job.WriteHyperparameters({{"mode", "world"}});
  const auto run = [&](const std::vector<std::string>& args) {
    return RunEntrypoint(args, {{"SAGEMAKER_BASE_DIR", job.base.string()}}, dir.path(),
                         std::chrono::seconds(30), (bin / "entrypoint").string());
  };
  SECTION("none: `train` with the base dir from SAGEMAKER_BASE_DIR") {
    const Finished done = run({});
    INFO(done.err);
    REQUIRE(done.exit_code == 0);
    CHECK(LinesStartingWith(done.out, "argv") ==
          std::vector<std::string>{"argv train --mode world"});
    CHECK(LinesStartingWith(done.err, "[entrypoint] no command given: running `entrypoint train`")
              .size() == 1);
  }
  SECTION("--help still prints the usage and starts nothing") {
    const Finished done = run({"--help"});
    CHECK(done.exit_code == 0);
    CHECK(done.out.find("SUBCOMMAND") != std::string::npos);
    CHECK(LinesStartingWith(done.out, "argv").empty());
    CHECK(done.err.find("no command given") == std::string::npos);
  }
  SECTION("an unknown command or options without one are still errors") {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"trian"}, std::vector<std::string>{"--nproc-per-node", "1"}}) {
      const Finished done = run(args);
      INFO(done.err);
      CHECK(done.exit_code == 2);
      CHECK(LinesStartingWith(done.out, "argv").empty());
      CHECK(done.err.find("no command given") == std::string::npos);
    }
  }
}

TEST_CASE("resourceconfig.json's network interface reaches NCCL and Gloo only if the host has it") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "world"}});
  const auto world_of = [](const Finished& done) {
    const auto lines = LinesStartingWith(done.out, "world ");
    REQUIRE(lines.size() == 1);
    return ParseWorld(lines[0]);
  };
  SECTION("present (lo): exported to both") {
    job.WriteResourceConfig({"algo-1"}, "algo-1", "lo");
    const Finished done = RunEntrypoint(Train(job), {}, dir.path());
    INFO(done.err);
    REQUIRE(done.exit_code == 0);
    const auto world = world_of(done);
    CHECK(world.at("NCCL_SOCKET_IFNAME") == "lo");
    CHECK(world.at("GLOO_SOCKET_IFNAME") == "lo");
    CHECK(done.err.find("network_interface_name") == std::string::npos);
  }
  SECTION("absent (SDK v3 local mode's ethwe): not exported, one line says so") {
    REQUIRE(if_nametoindex("ethwe") == 0);  // this test needs a host without it
    job.WriteResourceConfig({"algo-1"}, "algo-1", "ethwe");
    const Finished done = RunEntrypoint(Train(job), {}, dir.path());
    INFO(done.err);
    REQUIRE(done.exit_code == 0);
    const auto world = world_of(done);
    CHECK(world.at("NCCL_SOCKET_IFNAME") == "<unset>");
    CHECK(world.at("GLOO_SOCKET_IFNAME") == "<unset>");
    const auto notes =
        LinesStartingWith(done.err, "[entrypoint] " + job.base.string() +
                                        "/input/config/resourceconfig.json: "
                                        "\"network_interface_name\" names \"ethwe\"");
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("which this host does not have; ignored") != std::string::npos);
    // SM_NETWORK_INTERFACE_NAME still says what the file says, as the public toolkit's does.
    const Finished env = RunEntrypoint({"env", "--base-dir", job.base.string()}, {}, dir.path());
    REQUIRE(env.exit_code == 0);
    const auto child_env = nlohmann::json::parse(env.out)["child_environment"];
    CHECK(child_env["SM_NETWORK_INTERFACE_NAME"] == "ethwe");
    CHECK_FALSE(child_env.contains("NCCL_SOCKET_IFNAME"));
    CHECK(LinesStartingWith(env.err, "[entrypoint] " + job.base.string()).size() == 1);
  }
  SECTION("set by the user: left as it is") {
    job.WriteResourceConfig({"algo-1"}, "algo-1", "lo");
    const Finished done =
        RunEntrypoint(Train(job), {{"NCCL_SOCKET_IFNAME", "^docker"}}, dir.path());
    REQUIRE(done.exit_code == 0);
    const auto world = world_of(done);
    CHECK(world.at("NCCL_SOCKET_IFNAME") == "^docker");
    CHECK(world.at("GLOO_SOCKET_IFNAME") == "lo");
  }
}

TEST_CASE("SDK v3's hyperparameter strings give the program the argv v2's encoding gives") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  const auto argv_of = [&](const nlohmann::json& file) {
    job.WriteHyperparametersAsIs(file);
    const Finished done = RunEntrypoint(Train(job), {}, dir.path());
    INFO(done.err);
    REQUIRE(done.exit_code == 0);
    return LinesStartingWith(done.out, "argv");
  };
  // v3 (safe_serialize): strings as they are, other values json.dumps'd.
  const auto v3 = argv_of({{"sagemaker_program", "child"},
                           {"mode", "world"},
                           {"config-file", "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml"},
                           {"opts", R"(["SOLVER.MAX_ITER", "100"])"},
                           {"resume", "true"},
                           {"eval-only", "false"},
                           {"lr", "0.02"}});
  // v2 (framework estimators): every value json.dumps'd, strings quoted.
  const auto v2 = argv_of({{"sagemaker_program", "\"child\""},
                           {"mode", "\"world\""},
                           {"config-file", "\"COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml\""},
                           {"opts", R"(["SOLVER.MAX_ITER", "100"])"},
                           {"resume", "true"},
                           {"eval-only", "false"},
                           {"lr", "0.02"}});
  CHECK(v3 ==
        std::vector<std::string>{"argv --config-file COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml "
                                 "--eval-only False --lr 0.02 --mode world --opts "
                                 "['SOLVER.MAX_ITER', '100'] --resume True"});
  CHECK(v2 == v3);
}

TEST_CASE("Two supervisors on loopback hosts give their children one consistent world") {
  TempDir dir;
  JobTree master(dir.path() / "host1");
  JobTree worker(dir.path() / "host2");
  const std::vector<std::string> hosts = {"127.0.0.1", "127.0.0.2"};
  master.WriteResourceConfig(hosts, "127.0.0.1");
  worker.WriteResourceConfig(hosts, "127.0.0.2");
  for (const JobTree* job : {&master, &worker}) {
    job->InstallChildAs("child");
    job->WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "world"}});
  }
  const std::string port = std::to_string(FreePortPair());
  const std::vector<std::string> flags = {"--nproc-per-node", "2", "--master-port", port,
                                          "--peer-timeout",   "30"};
  // The worker first: it has to wait for the master to appear.
  EntrypointRun worker_run(Train(worker, flags), {}, dir.path() / "host2");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EntrypointRun master_run(Train(master, flags), {}, dir.path() / "host1");
  const Finished worker_done = worker_run.Wait(std::chrono::seconds(40));
  const Finished master_done = master_run.Wait(std::chrono::seconds(40));
  INFO("master:\n" << master_done.err << "\nworker:\n" << worker_done.err);
  REQUIRE(master_done.exit_code == 0);
  REQUIRE(worker_done.exit_code == 0);
  CHECK(worker_done.err.find("waiting for the master") != std::string::npos);

  std::set<std::string> ranks;
  for (const auto& [done, host, group] :
       {std::tuple{&master_done, "127.0.0.1", "0"}, std::tuple{&worker_done, "127.0.0.2", "1"}}) {
    const auto lines = LinesStartingWith(done->out, "world ");
    REQUIRE(lines.size() == 2);
    for (const auto& line : lines) {
      const auto world = ParseWorld(line);
      ranks.insert(world.at("RANK"));
      CHECK(world.at("WORLD_SIZE") == "4");
      CHECK(world.at("LOCAL_WORLD_SIZE") == "2");
      CHECK(world.at("GROUP_RANK") == group);
      CHECK(world.at("MASTER_ADDR") == "127.0.0.1");
      CHECK(world.at("MASTER_PORT") == port);
      CHECK(world.at("SM_CURRENT_HOST") == host);
      CHECK(std::stoi(world.at("RANK")) ==
            std::stoi(group) * 2 + std::stoi(world.at("LOCAL_RANK")));
    }
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2", "3"});
}

TEST_CASE("A worker whose master never appears gives up after --peer-timeout") {
  TempDir dir;
  JobTree worker(dir.path());
  worker.WriteResourceConfig({"127.0.0.1", "127.0.0.2"}, "127.0.0.2");
  worker.InstallChildAs("child");
  worker.WriteHyperparameters({{"sagemaker_program", "child"}, {"mode", "world"}});
  const std::string port = std::to_string(FreePortPair());
  const Finished run =
      RunEntrypoint(Train(worker, {"--master-port", port, "--peer-timeout", "1"}), {}, dir.path());
  INFO(run.err);
  CHECK(run.exit_code == 3);
  CHECK(run.out.empty());  // the program never started
  const std::string failure = ReadFile(worker.Failure());
  CHECK(failure.find("127.0.0.1:" + std::to_string(std::stoi(port) + 1)) != std::string::npos);
  CHECK(run.elapsed < std::chrono::seconds(10));
}

TEST_CASE("`entrypoint env` prints the resolved job as JSON") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteResourceConfig({"127.0.0.1", "127.0.0.2"}, "127.0.0.2");
  job.WriteHyperparameters({{"sagemaker_program", "child"}, {"lr", 0.5}});
  const Finished run = RunEntrypoint(
      {"env", "--base-dir", job.base.string(), "--nproc-per-node", "3"}, {}, dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto env = nlohmann::json::parse(run.out);
  CHECK(env["world"]["node_rank"] == 1);
  CHECK(env["world"]["nnodes"] == 2);
  CHECK(env["world"]["world_size"] == 6);
  CHECK(env["world"]["master_addr"] == "127.0.0.1");
  CHECK(env["channels"][0]["name"] == "train");
  CHECK(env["hyperparameters"]["user"]["lr"] == 0.5);
  CHECK(env["hyperparameters"]["framework"]["sagemaker_program"] == "child");
  CHECK(env["program"]["argv"].back() == "0.5");
  CHECK(env["processes"].size() == 3);
  CHECK(env["child_environment"]["RANK"] == "3");
  CHECK(env["child_environment"]["SM_CURRENT_HOST"] == "127.0.0.2");
  CHECK(env["child_environment"]["SAGEMAKER_BASE_DIR"] == job.base.string());
  CHECK(env["child_environment"]["SM_HPS"] == R"({"lr":0.5})");
  CHECK(env["wait_for_peers"] == true);
}

TEST_CASE("Launchers that start one copy per node get every slot, per-slot launchers get one") {
  TempDir dir;
  JobTree job(dir.path());
  job.InstallChildAs("child");
  job.WriteHyperparameters({{"sagemaker_program", "child"}});
  auto processes = [&](const std::map<std::string, std::string>& env,
                       std::vector<std::string> extra) {
    std::vector<std::string> args = {"env", "--base-dir", job.base.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const Finished run = RunEntrypoint(args, env, dir.path());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    return nlohmann::json::parse(run.out)["processes"];
  };
  SECTION("Open MPI with one process per node: this node runs all of its slots") {
    const auto p = processes({{"OMPI_COMM_WORLD_RANK", "1"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                              {"MASTER_ADDR", "127.0.0.1"}},
                             {"--nproc-per-node", "2"});
    REQUIRE(p.size() == 2);
    CHECK(p[0]["rank"] == 2);
    CHECK(p[1]["rank"] == 3);
  }
  SECTION("Open MPI with one process per slot: just this slot") {
    const auto p = processes({{"OMPI_COMM_WORLD_RANK", "3"},
                              {"OMPI_COMM_WORLD_SIZE", "4"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                              {"MASTER_ADDR", "127.0.0.1"}},
                             {});
    REQUIRE(p.size() == 1);
    CHECK(p[0]["local_rank"] == 1);
    CHECK(p[0]["rank"] == 3);
  }
  SECTION("Slurm with one task per GPU: just this task's slot") {
    const auto p = processes({{"SLURM_PROCID", "2"},
                              {"SLURM_NTASKS", "4"},
                              {"SLURM_LOCALID", "0"},
                              {"SLURM_NODEID", "1"},
                              {"SLURM_NNODES", "2"},
                              {"SLURM_JOB_NODELIST", "node[1-2]"}},
                             {});
    REQUIRE(p.size() == 1);
    CHECK(p[0]["local_rank"] == 0);
    CHECK(p[0]["rank"] == 2);
  }
}

TEST_CASE(
    "`entrypoint serve` becomes the server with the arguments and environment passed through") {
  TempDir dir;
  SECTION("found") {
    const Finished run = RunEntrypoint({"serve", "--server", ChildBinary(), "--mode", "world"},
                                       {{"RANK", "5"}}, dir.path());
    REQUIRE(run.exit_code == 0);
    CHECK(LinesStartingWith(run.out, "argv") == std::vector<std::string>{"argv --mode world"});
    CHECK(ParseWorld(LinesStartingWith(run.out, "world ").at(0)).at("RANK") == "5");
  }
  SECTION("KServe's container args in place of the CMD: a server flag first means serve") {
    const Finished run = RunEntrypoint({"--model_name", "site-a", "--mode", "world"},
                                       {{"MRCNN_SERVER", ChildBinary()}}, dir.path());
    REQUIRE(run.exit_code == 0);
    CHECK(LinesStartingWith(run.out, "argv") ==
          std::vector<std::string>{"argv --model_name site-a --mode world"});
    const Finished joined =
        RunEntrypoint({"--model_name=site-a", "--http_port=8080", "--mode", "world"},
                      {{"MRCNN_SERVER", ChildBinary()}}, dir.path());
    REQUIRE(joined.exit_code == 0);
    CHECK(LinesStartingWith(joined.out, "argv") ==
          std::vector<std::string>{"argv --model_name=site-a --http_port=8080 --mode world"});
  }
  SECTION("missing") {
    const Finished run =
        RunEntrypoint({"serve"}, {{"MRCNN_SERVER", "/nonexistent/server"}}, dir.path());
    CHECK(run.exit_code == 127);
    CHECK(run.err.find("/nonexistent/server") != std::string::npos);
  }
}
