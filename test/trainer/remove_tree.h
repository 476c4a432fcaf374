#pragma once
// RemoveTree(PATH): removes PATH and everything under it, following no link; a missing PATH
// is no error. For tests linked with LibTorch: not std::filesystem::remove_all, because
// libtorch.so exports its own, which crashes when it interposes on libstdc++'s (torch 2.11
// wheel).
#include <ftw.h>

#include <cstdio>
#include <filesystem>

namespace mrcnn::test {

inline void RemoveTree(const std::filesystem::path& path) {
  ::nftw(
      path.c_str(),
      [](const char* f, const struct stat*, int, struct FTW*) { return std::remove(f); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

}  // namespace mrcnn::test
