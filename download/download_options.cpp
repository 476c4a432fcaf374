#include "download/download_options.h"

#include <algorithm>

namespace mrcnn::download {

DownloadOptions DownloadOptionsFromEnv(const common::EnvMap& env) {
  DownloadOptions options;
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  if (auto v = common::EnvInteger(env, "MRCNN_DOWNLOAD_CONNECT_TIMEOUT_S", 1, 3600)) {
    options.connect_timeout = seconds(*v);
  }
  if (auto v = common::EnvInteger(env, "MRCNN_DOWNLOAD_IDLE_TIMEOUT_S", 1, 3600)) {
    options.idle_timeout = seconds(*v);
  }
  if (auto v = common::EnvInteger(env, "MRCNN_DOWNLOAD_ATTEMPTS", 1, 100)) {
    options.attempts = static_cast<int>(*v);
  }
  if (auto v = common::EnvInteger(env, "MRCNN_DOWNLOAD_BACKOFF_MS", 0, 600'000)) {
    options.first_backoff = milliseconds(*v);
    options.max_backoff = std::max(options.max_backoff, options.first_backoff);
  }
  if (auto v = common::EnvInteger(env, "MRCNN_DOWNLOAD_PROGRESS_S", 1, 3600)) {
    options.progress_period = seconds(*v);
  }
  return options;
}

std::chrono::milliseconds BackoffAfter(const DownloadOptions& options, int attempt) {
  std::chrono::milliseconds wait = options.first_backoff;
  for (int i = 1; i < attempt && wait < options.max_backoff; ++i)
    wait *= 2;
  return std::min(wait, options.max_backoff);
}

}  // namespace mrcnn::download
