// `trainer fetch-weights`: a MODEL.WEIGHTS value (detectron2://, catalog://, https://, http://,
// s3://) fetched as a training job fetches it (the same cache, checks, proxies, mirror and
// tries), without a job: to fill a weights channel or a cache ahead of time, or to check that
// a job's machine reaches the file. Prints the cached file's path on stdout; progress and
// errors go to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/env_map.h"
#include "download/weights_cache.h"
#include "download/zoo_url.h"
#include "trainer/commands/command_registry.h"
#include "trainer/engine/config/weights_fetch.h"

namespace mrcnn::trainer {
namespace {

struct FetchArgs {
  std::string weights;
  std::string cache;
};

int Fetch(const FetchArgs& args) {
  const common::EnvMap env = common::CurrentEnvironment();
  const std::string mirror = common::Lookup(env, "MRCNN_ZOO_MIRROR").value_or("");
  const auto canonical = download::WeightsUrl(args.weights, "");
  if (!canonical) {
    throw std::runtime_error(
        "fetch-weights: \"" + args.weights +
        "\" is not a URL (detectron2://, catalog://, https://, http://, s3://)");
  }
  std::filesystem::path cache = args.cache;
  if (cache.empty()) {
    const auto dir = common::Lookup(env, "MRCNN_WEIGHTS_CACHE");
    if (!dir || dir->empty()) {
      throw std::runtime_error("fetch-weights: give --cache DIR (or set MRCNN_WEIGHTS_CACHE)");
    }
    cache = *dir;
  }
  const std::filesystem::path file = download::CachePathOf(cache, *canonical);
  engine::FetchWeightsFile(
      args.weights, *download::WeightsUrl(args.weights, mirror), file, env,
      [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  std::printf("%s\n", file.c_str());
  return 0;
}

const CommandRegistration kFetchWeights{
    "fetch-weights",
    "Download a MODEL.WEIGHTS URL (detectron2://, catalog://, https://, s3://) into the weights "
    "cache as a training job does; prints the file's path",
    [](CLI::App& sub) -> CommandAction {
      auto args = std::make_shared<FetchArgs>();
      sub.add_option("weights", args->weights, "the MODEL.WEIGHTS value")->required();
      sub.add_option("--cache", args->cache, "the cache directory (default: $MRCNN_WEIGHTS_CACHE)");
      return [args] { return Fetch(*args); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
