#pragma once
// Where downloaded weights are kept: MRCNN_WEIGHTS_CACHE, else <checkpoint dir>/weights_cache.
// Beside the checkpoints because SageMaker uploads that directory and restores it for a spot
// restart (checkpoint_s3_uri), so a restarted job finds its weights instead of fetching them
// again. Inside, a file's path is its URL's host and path (s3/<bucket>/<key> for S3), so two
// different files never share a name and a person can tell what each one is:
//   weights_cache/dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl
// The cache is keyed by the URL before MRCNN_ZOO_MIRROR is applied: a mirror serves the same
// files, so changing it does not fetch them again.
#include <filesystem>
#include <string>

#include "common/env_map.h"

namespace mrcnn::download {

// MRCNN_WEIGHTS_CACHE when set and not empty, else checkpoint_dir / "weights_cache".
std::filesystem::path WeightsCacheDir(const common::EnvMap& env,
                                      const std::filesystem::path& checkpoint_dir);

// The cache file of `url` (https://, http:// or s3://; the query is not part of the key).
// Throws std::invalid_argument for a URL without a file name or with "." / ".." segments
// (which would leave the cache). Characters other than letters, digits and -._~+=,@ become
// '_' (a port is written host_port).
std::filesystem::path CachePathOf(const std::filesystem::path& cache_dir, const std::string& url);

// What sits beside a cache file while it is fetched and after it is checked.
std::filesystem::path PartialPathOf(const std::filesystem::path& cached);   // <file>.partial
std::filesystem::path VerifiedPathOf(const std::filesystem::path& cached);  // <file>.md5
std::filesystem::path LockPathOf(const std::filesystem::path& cached);      // <file>.lock

}  // namespace mrcnn::download
