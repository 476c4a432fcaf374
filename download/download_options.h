#pragma once
// How patient a download is. The defaults bound a failing download to under two minutes: a
// server that accepts and never answers costs attempts x idle timeout plus the backoff
// (4 x 20 s + 1 + 2 + 4 s = 87 s); a refused connection or a 5xx costs the backoff alone; a 4xx
// fails at once. Tests shrink them through the environment:
//   MRCNN_DOWNLOAD_CONNECT_TIMEOUT_S  connecting, the proxy's CONNECT and the TLS handshake (10)
//   MRCNN_DOWNLOAD_IDLE_TIMEOUT_S     no byte received for this long is a stall (20)
//   MRCNN_DOWNLOAD_ATTEMPTS           tries in all, resumed where the last one stopped (4)
//   MRCNN_DOWNLOAD_BACKOFF_MS         the wait after the first failed try, doubled after each
//   (1000) MRCNN_DOWNLOAD_PROGRESS_S         seconds between progress lines (5)
#include <chrono>

#include "common/env_map.h"

namespace mrcnn::download {

struct DownloadOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds idle_timeout{20'000};
  int attempts = 4;
  std::chrono::milliseconds first_backoff{1'000};
  std::chrono::milliseconds max_backoff{8'000};
  int max_redirects = 10;
  std::chrono::milliseconds progress_period{5'000};
};

// The defaults with the variables above applied; a bad value is a common::ConfigError naming
// the variable.
DownloadOptions DownloadOptionsFromEnv(const common::EnvMap& env);

// The wait before try `attempt` + 1 (attempt counts from 1): first_backoff doubled each time,
// at most max_backoff.
std::chrono::milliseconds BackoffAfter(const DownloadOptions& options, int attempt);

}  // namespace mrcnn::download
