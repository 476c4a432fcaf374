#include "download/weights_cache.h"

#include <stdexcept>

namespace mrcnn::download {
namespace fs = std::filesystem;
namespace {

std::string SafeSegment(std::string_view segment) {
  std::string out(segment);
  for (char& c : out) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("-._~+=,@").find(c) != std::string_view::npos;
    if (!keep)
      c = '_';
  }
  return out;
}

}  // namespace

fs::path WeightsCacheDir(const common::EnvMap& env, const fs::path& checkpoint_dir) {
  if (auto dir = common::Lookup(env, "MRCNN_WEIGHTS_CACHE"); dir && !dir->empty())
    return *dir;
  return checkpoint_dir / "weights_cache";
}

fs::path CachePathOf(const fs::path& cache_dir, const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    throw std::invalid_argument("\"" + url + "\" is not a URL");
  }
  std::string_view rest = std::string_view(url).substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  fs::path path = cache_dir;
  if (url.starts_with("s3://"))
    path /= "s3";
  int segments = 0;  // the host (or bucket) and the path's
  size_t start = 0;
  while (start < rest.size()) {
    const size_t end = std::min(rest.find('/', start), rest.size());
    const std::string_view segment = rest.substr(start, end - start);
    if (segment == "." || segment == "..") {
      throw std::invalid_argument("\"" + url + "\" has a \"" + std::string(segment) +
                                  "\" segment, which the weights cache does not accept");
    }
    if (!segment.empty()) {
      path /= SafeSegment(segment);
      ++segments;
    }
    start = end + 1;
  }
  if (segments < 2 || rest.ends_with('/')) {
    throw std::invalid_argument("\"" + url + "\" names no file");
  }
  return path;
}

fs::path PartialPathOf(const fs::path& cached) {
  return cached.string() + ".partial";
}
fs::path VerifiedPathOf(const fs::path& cached) {
  return cached.string() + ".md5";
}
fs::path LockPathOf(const fs::path& cached) {
  return cached.string() + ".lock";
}

}  // namespace mrcnn::download
