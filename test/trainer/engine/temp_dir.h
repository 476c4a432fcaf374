#pragma once
// A fresh path under the system temp dir (not created), removed with everything in it at scope end.
// Not fs::remove_all: libtorch.so exports its own std::filesystem::remove_all, which
// crashes when it interposes on libstdc++'s (torch 2.11 wheel).
#include <ftw.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

namespace mrcnn::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "engine_test_") {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / (prefix + std::to_string(rd()));
  }
  ~TempDir() {
    ::nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace mrcnn::test
