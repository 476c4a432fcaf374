#include "trainer/data/whole_file.h"

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace mrcnn::data {

std::string ReadWholeFile(const std::filesystem::path& path, const char* what) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw std::runtime_error(path.string() + ": cannot open " + what +
                             " (check the path and read permission)");
  }
  std::string text;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    long size = std::ftell(f.get());
    if (size > 0)
      text.reserve(static_cast<size_t>(size));
    std::fseek(f.get(), 0, SEEK_SET);
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0)
    text.append(buf, n);
  if (std::ferror(f.get()))
    throw std::runtime_error(path.string() + ": read error on " + what);
  return text;
}

}  // namespace mrcnn::data
