#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <ftw.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "trainer/engine/checkpoint/atomic_file.h"
#include "trainer/engine/checkpoint/checkpoint.h"
#include "trainer/engine/checkpoint/rng_state.h"
#include "test/trainer/engine/temp_dir.h"

using namespace mrcnn::engine;
namespace fs = std::filesystem;

namespace {

using mrcnn::test::TempDir;

NamedTensors Sample(double value) {
  return {{"model/conv.weight", torch::full({4, 3, 3, 3}, value)},
          {"model/conv.bias", torch::arange(4, torch::kFloat) * value},
          {"optimizer/momentum/conv.weight", torch::full({4, 3, 3, 3}, -value)},
          {"scaler/scale", torch::tensor({65536.0}, torch::kDouble)},
          {"rng/cpu", torch::arange(16, torch::kUInt8)}};
}

}  // namespace

TEST_CASE("CRC-32 matches zlib's check value", "[checkpoint]") {
  const char* text = "123456789";
  CHECK(Crc32(text, 9) == 0xCBF43926u);
  CHECK(Crc32(text + 4, 5, Crc32(text, 4)) == 0xCBF43926u);
}

TEST_CASE("atomic write replaces the file and leaves no temporary", "[checkpoint]") {
  TempDir dir;
  fs::create_directories(dir.path);
  WriteFileAtomically(dir.path / "a.bin", "first");
  WriteFileAtomically(dir.path / "a.bin", "second");
  CHECK(ReadWholeFile(dir.path / "a.bin") == "second");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  CHECK_THROWS_WITH(WriteFileAtomically(dir.path / "missing/a.bin", "x"), Catch::Contains("missing"));
}

TEST_CASE("save, list, keep the last K, load the newest", "[checkpoint]") {
  TempDir dir;
  CheckpointDir store(dir.path / "ckpt", 2);
  CHECK(store.List().empty());
  CHECK_FALSE(store.LoadNewestValid([](const std::string&) {}).has_value());
  for (int64_t it : {100, 200, 300}) store.Save(it, Sample(static_cast<double>(it)));
  auto files = store.List();
  REQUIRE(files.size() == 2);
  CHECK(files[0].filename() == "checkpoint_00000200.safetensors");
  CHECK(files[1].filename() == "checkpoint_00000300.safetensors");
  std::vector<std::string> warnings;
  auto loaded = store.LoadNewestValid([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(warnings.empty());
  CHECK(loaded->iteration == 300);
  auto want = Sample(300);
  REQUIRE(loaded->tensors.size() == want.size());
  for (const auto& [name, tensor] : want) {
    INFO(name);
    CHECK(torch::equal(loaded->tensors.at(name), tensor));
  }
  CHECK_THROWS(CheckpointDir(dir.path, 0));
  CHECK_THROWS(store.Save(400, {{"checkpoint/iteration", torch::zeros({1})}}));
}

TEST_CASE("a truncated or corrupted newest checkpoint is skipped with a warning", "[checkpoint]") {
  TempDir dir;
  CheckpointDir store(dir.path, 3);
  store.Save(10, Sample(1));
  store.Save(20, Sample(2));
  fs::path newest = store.Save(30, Sample(3));

  SECTION("truncated") {
    fs::resize_file(newest, fs::file_size(newest) - 7);
  }
  SECTION("one flipped byte in the tensor data") {
    std::string bytes = ReadWholeFile(newest);
    bytes[bytes.size() - 40] ^= 0x01;
    std::ofstream(newest, std::ios::binary | std::ios::trunc) << bytes;
  }
  SECTION("emptied") {
    std::ofstream(newest, std::ios::binary | std::ios::trunc);
  }
  std::vector<std::string> warnings;
  auto loaded = store.LoadNewestValid([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(loaded->iteration == 20);
  CHECK(torch::equal(loaded->tensors.at("model/conv.bias"), Sample(2).at("model/conv.bias")));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("checkpoint_00000030.safetensors"));
}

TEST_CASE("stray temporary files are not checkpoints", "[checkpoint]") {
  TempDir dir;
  CheckpointDir store(dir.path, 3);
  store.Save(5, Sample(1));
  std::ofstream(dir.path / "checkpoint_00000009.safetensors.tmp1234") << "partial";
  REQUIRE(store.List().size() == 1);
  CHECK(store.LoadNewestValid([](const std::string&) {})->iteration == 5);
}

TEST_CASE("RNG state round trip reproduces the random stream", "[checkpoint]") {
  torch::manual_seed(123);
  torch::rand({3});
  auto state = CaptureRngState();
  auto first = torch::rand({8});
  torch::rand({100});
  RestoreRngState(state);
  CHECK(torch::equal(torch::rand({8}), first));
}

TEST_CASE("a write in progress is staged beside the directory, never in it", "[checkpoint]") {
  TempDir root;
  const fs::path dir = root.path / "checkpoints";
  fs::create_directories(dir);
  const fs::path staging = StagingDirFor(dir);
  CHECK(staging == root.path / ".checkpoints.partial");
  CHECK(StagingDirFor(root.path / "checkpoints/") == staging);

  // A writer killed in the middle of a large write leaves its temporary in the staging
  // directory only; the next start removes it.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      const std::string big(256u << 20, 'x');
      for (;;)
        WriteFileAtomically(dir / "checkpoint_00000001.safetensors", big);
    } catch (...) {
    }
    ::_exit(1);
  }
  const fs::path partial = staging / ("checkpoint_00000001.safetensors.tmp" + std::to_string(child));
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {  // up to 20 s
    std::error_code ec;
    seen = fs::exists(partial, ec) && fs::file_size(partial, ec) > 0;
    if (!seen)
      ::usleep(10000);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(seen);
  REQUIRE(WIFSIGNALED(status));
  for (const auto& entry : fs::directory_iterator(dir))  // only complete files, if any
    CHECK(entry.path().filename() == "checkpoint_00000001.safetensors");
  REQUIRE(fs::exists(partial));

  // Our own PID's leftover (a restarted container reuses PIDs) and a dead writer's go; a
  // live writer's (PID 1 exists in every PID namespace) and other files stay.
  auto touch = [](const fs::path& p) { std::ofstream(p) << "x"; };
  touch(staging / "keep.txt");
  touch(dir / ("checkpoint_00000002.safetensors.tmp" + std::to_string(::getpid())));
  touch(dir / "checkpoint_00000003.safetensors.tmp1");
  touch(dir / "notes.tmp99999999");
  const auto removed = CheckpointDir(dir, 2).RemoveStaleTemporaries();
  CHECK(removed.size() == 2);
  CHECK_FALSE(fs::exists(partial));
  CHECK_FALSE(fs::exists(dir / ("checkpoint_00000002.safetensors.tmp" + std::to_string(::getpid()))));
  CHECK(fs::exists(dir / "checkpoint_00000003.safetensors.tmp1"));
  CHECK(fs::exists(dir / "notes.tmp99999999"));
  CHECK(fs::exists(staging / "keep.txt"));
}
