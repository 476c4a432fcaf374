// Where a URL's file is cached: by host and path, never two files on one name, never
// outside the cache.
#include <catch2/catch.hpp>

#include "download/weights_cache.h"

namespace mrcnn::download {

TEST_CASE("the cache is MRCNN_WEIGHTS_CACHE, else beside the checkpoints", "[download]") {
  CHECK(WeightsCacheDir({}, "/opt/ml/checkpoints") == "/opt/ml/checkpoints/weights_cache");
  CHECK(WeightsCacheDir({{"MRCNN_WEIGHTS_CACHE", ""}}, "/ck") == "/ck/weights_cache");
  CHECK(WeightsCacheDir({{"MRCNN_WEIGHTS_CACHE", "/fsx/cache"}}, "/ck") == "/fsx/cache");
}

TEST_CASE("a URL's cache file is its host and path", "[download]") {
  const std::filesystem::path c = "/c";
  CHECK(CachePathOf(c,
                    "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl") ==
        "/c/dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl");
  // Same file name, different files: different paths.
  CHECK(
      CachePathOf(c, "https://dl.fbaipublicfiles.com/detectron/ImageNetPretrained/MSRA/R-50.pkl") !=
      CachePathOf(c, "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl"));
  CHECK(CachePathOf(c, "s3://bucket/zoo/R-50.pkl") == "/c/s3/bucket/zoo/R-50.pkl");
  CHECK(CachePathOf(c, "https://bucket/zoo/R-50.pkl") == "/c/bucket/zoo/R-50.pkl");
  CHECK(CachePathOf(c, "http://127.0.0.1:8443/a/b.pkl?X-Amz-Signature=1#f") ==
        "/c/127.0.0.1_8443/a/b.pkl");
  CHECK(CachePathOf(c, "https://h//a//b.pkl") == "/c/h/a/b.pkl");
  CHECK(CachePathOf(c, "https://h/a%20b/c d.pkl") == "/c/h/a_20b/c_d.pkl");
}

TEST_CASE("URLs that would leave the cache or name no file are refused", "[download]") {
  CHECK_THROWS_WITH(CachePathOf("/c", "https://h/a/../../etc/passwd"), Catch::Contains("\"..\""));
  CHECK_THROWS_AS(CachePathOf("/c", "https://h/./x"), std::invalid_argument);
  CHECK_THROWS_WITH(CachePathOf("/c", "https://h"), Catch::Contains("names no file"));
  CHECK_THROWS_WITH(CachePathOf("/c", "https://h/dir/"), Catch::Contains("names no file"));
  CHECK_THROWS_AS(CachePathOf("/c", "s3://bucket"), std::invalid_argument);
  CHECK_THROWS_AS(CachePathOf("/c", "no-scheme/x"), std::invalid_argument);
}

TEST_CASE("what sits beside a cache file", "[download]") {
  CHECK(PartialPathOf("/c/h/R-50.pkl") == "/c/h/R-50.pkl.partial");
  CHECK(VerifiedPathOf("/c/h/R-50.pkl") == "/c/h/R-50.pkl.md5");
  CHECK(LockPathOf("/c/h/R-50.pkl") == "/c/h/R-50.pkl.lock");
}

}  // namespace mrcnn::download
