#pragma once
// Fetching MODEL.WEIGHTS when it is a URL (ResolveTrainJob chose its cache file): the
// weights channel's file first, then the cache, then the network (download/fetch_file.h).
// Only training jobs and `trainer fetch-weights` call this; the server never downloads.
// Without the download part in the build (no OpenSSL) it fails naming the fix.
#include <filesystem>
#include <functional>
#include <string>

#include "common/env_map.h"
#include "trainer/engine/config/job_config.h"

namespace mrcnn::engine {

using WeightsLog = std::function<void(const std::string&)>;

// Fills `file` from `url` unless it is there (and sound). Throws std::runtime_error that names
// MODEL.WEIGHTS (`weights_key`), the URL, the cause and the fix. Returns true when it
// downloaded.
bool FetchWeightsFile(const std::string& weights_key, const std::string& url,
                      const std::filesystem::path& file, const common::EnvMap& env,
                      const WeightsLog& log);

// FetchWeightsFile for a resolved job; nothing to do when its weights are not a URL.
inline void FetchJobWeights(const TrainJob& job, const common::EnvMap& env, const WeightsLog& log) {
  if (job.weights_url.empty() || !job.weights)
    return;
  FetchWeightsFile(job.config.GetString("MODEL.WEIGHTS"), job.weights_url, *job.weights, env, log);
}

}  // namespace mrcnn::engine
