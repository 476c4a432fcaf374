#pragma once
// A fresh path under the system temp dir (not created), removed with everything in it at scope end
// (RemoveTree: not fs::remove_all, which crashes in tests linked with LibTorch).
#include <filesystem>
#include <random>
#include <string>

#include "test/trainer/remove_tree.h"
#include "trainer/engine/checkpoint/atomic_file.h"

namespace mrcnn::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "engine_test_") {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / (prefix + std::to_string(rd()));
  }
  ~TempDir() {
    // The directory, and the staging directory beside it that atomic writes into it use.
    const auto staging = engine::StagingDirFor(path);
    for (const auto& p : {path, staging})
      RemoveTree(p);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace mrcnn::test
