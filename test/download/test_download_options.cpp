// The download's bounds, from the environment, and the progress lines.
#include <catch2/catch.hpp>

#include "common/config_error.h"
#include "download/download_options.h"
#include "download/progress.h"

namespace mrcnn::download {

using namespace std::chrono_literals;

TEST_CASE("the defaults bound a stalled download to under two minutes", "[download]") {
  const DownloadOptions o = DownloadOptionsFromEnv({});
  std::chrono::milliseconds worst = o.attempts * std::max(o.idle_timeout, o.connect_timeout);
  for (int attempt = 1; attempt < o.attempts; ++attempt)
    worst += BackoffAfter(o, attempt);
  CHECK(worst < 120s);
  CHECK(o.attempts >= 3);
}

TEST_CASE("the environment sets the bounds; bad values name the variable", "[download]") {
  const DownloadOptions o = DownloadOptionsFromEnv({{"MRCNN_DOWNLOAD_CONNECT_TIMEOUT_S", "2"},
                                                    {"MRCNN_DOWNLOAD_IDLE_TIMEOUT_S", "3"},
                                                    {"MRCNN_DOWNLOAD_ATTEMPTS", "2"},
                                                    {"MRCNN_DOWNLOAD_BACKOFF_MS", "50"},
                                                    {"MRCNN_DOWNLOAD_PROGRESS_S", "1"}});
  CHECK(o.connect_timeout == 2s);
  CHECK(o.idle_timeout == 3s);
  CHECK(o.attempts == 2);
  CHECK(o.first_backoff == 50ms);
  CHECK(o.progress_period == 1s);
  CHECK_THROWS_WITH(DownloadOptionsFromEnv({{"MRCNN_DOWNLOAD_ATTEMPTS", "0"}}),
                    Catch::Contains("MRCNN_DOWNLOAD_ATTEMPTS"));
  CHECK_THROWS_AS(DownloadOptionsFromEnv({{"MRCNN_DOWNLOAD_IDLE_TIMEOUT_S", "x"}}),
                  common::ConfigError);
}

TEST_CASE("backoff doubles up to its cap", "[download]") {
  DownloadOptions o;
  CHECK(BackoffAfter(o, 1) == 1s);
  CHECK(BackoffAfter(o, 2) == 2s);
  CHECK(BackoffAfter(o, 3) == 4s);
  CHECK(BackoffAfter(o, 4) == 8s);
  CHECK(BackoffAfter(o, 9) == 8s);
  o.first_backoff = 0ms;
  CHECK(BackoffAfter(o, 5) == 0ms);
}

TEST_CASE("progress lines give bytes, total, rate and ETA", "[download]") {
  const std::string line = ProgressLine("R-50.pkl", 50'000'000, 100'000'000, 0, 5s);
  CHECK(line ==
        "[weights] R-50.pkl: 50.0 MB of 100.0 MB (50.0%) at 10.0 MB/s, eta 5 s "
        "[50000000/100000000 bytes]");
  // The rate counts what this process received, not what a resumed partial held.
  CHECK_THAT(ProgressLine("f", 60'000'000, 100'000'000, 50'000'000, 2s),
             Catch::Contains("at 5.0 MB/s, eta 8 s"));
  CHECK(ProgressLine("f", 1'000'000, std::nullopt, 0, 1s) ==
        "[weights] f: 1.0 MB at 1.0 MB/s [1000000/? bytes]");
}

TEST_CASE("progress lines come at most once a period", "[download]") {
  ProgressClock clock(5s);
  const auto now = std::chrono::steady_clock::now();
  CHECK_FALSE(clock.Due(now + 1s));
  CHECK(clock.Due(now + 6s));
  CHECK_FALSE(clock.Due(now + 8s));
  CHECK(clock.Due(now + 12s));
}

}  // namespace mrcnn::download
