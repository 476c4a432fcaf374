#pragma once
// A fresh path under the system temp dir (not created), removed with everything in it at scope end.
// Not fs::remove_all: libtorch.so exports its own std::filesystem::remove_all, which
// crashes when it interposes on libstdc++'s (torch 2.11 wheel).
#include <ftw.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

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
    for (const auto& p : {path, staging}) {
      ::nftw(
          p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return std::remove(f); }, 16,
          FTW_DEPTH | FTW_PHYS);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace mrcnn::test
