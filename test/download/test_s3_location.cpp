// s3://bucket/key as the request S3 accepts: the endpoint, the addressing style, the region,
// and a signature equal to botocore's S3SigV4Auth on the same request.
#include <catch2/catch.hpp>
#include <ctime>
#include <map>

#include "download/s3_location.h"

namespace mrcnn::download {

TEST_CASE("s3:// URLs split into bucket and key", "[download][s3]") {
  const S3Object o = ParseS3Url("s3://my-bucket/zoo/detectron2/R-50.pkl");
  CHECK(o.bucket == "my-bucket");
  CHECK(o.key == "zoo/detectron2/R-50.pkl");
  CHECK_THROWS_AS(ParseS3Url("s3://my-bucket"), std::invalid_argument);
  CHECK_THROWS_AS(ParseS3Url("s3://my-bucket/"), std::invalid_argument);
  CHECK_THROWS_AS(ParseS3Url("s3:///key"), std::invalid_argument);
  CHECK_THROWS_AS(ParseS3Url("https://b/k"), std::invalid_argument);
}

TEST_CASE("AWS's S3 is addressed virtual-hosted in the job's region", "[download][s3]") {
  const S3Object o{"my-bucket", "zoo/Image Net/R-50.pkl"};
  const S3Address a =
      S3AddressOf(o, {{"AWS_REGION", "eu-west-1"}, {"AWS_DEFAULT_REGION", "us-west-2"}});
  CHECK(a.region == "eu-west-1");
  CHECK(a.url.ToString() ==
        "https://my-bucket.s3.eu-west-1.amazonaws.com/zoo/Image%20Net/R-50.pkl");
  CHECK(S3AddressOf(o, {{"AWS_DEFAULT_REGION", "us-west-2"}}).region == "us-west-2");
  CHECK(S3AddressOf(o, {}).region == "us-east-1");
  // A dotted bucket name is not a single DNS label under the certificate: path-style.
  CHECK(S3AddressOf({"my.bucket", "k.pkl"}, {}).url.ToString() ==
        "https://s3.us-east-1.amazonaws.com/my.bucket/k.pkl");
}

TEST_CASE("an endpoint variable is addressed path-style, the S3 one first", "[download][s3]") {
  const S3Object o{"b", "k/w.pkl"};
  CHECK(S3AddressOf(o, {{"AWS_ENDPOINT_URL", "http://127.0.0.1:5000"}}).url.ToString() ==
        "http://127.0.0.1:5000/b/k/w.pkl");
  CHECK(S3AddressOf(o, {{"AWS_ENDPOINT_URL", "http://other:1"},
                        {"AWS_ENDPOINT_URL_S3", "https://minio.internal:9000/store/"}})
            .url.ToString() == "https://minio.internal:9000/store/b/k/w.pkl");
  CHECK_THROWS_WITH(S3AddressOf(o, {{"AWS_ENDPOINT_URL_S3", "minio:9000"}}),
                    Catch::Contains("AWS_ENDPOINT_URL_S3"));
}

TEST_CASE("a ranged GET is signed as botocore's S3SigV4Auth signs it", "[download][s3]") {
  // botocore 1.44.8: S3SigV4Auth(Credentials("AKIDEXAMPLE", SECRET, "SESSIONTOKEN"), "s3",
  // "eu-west-1").add_auth on GET http://127.0.0.1:9000/my-bucket/zoo/detectron2/Image%20Net/
  // R-50.pkl with Range: bytes=100- at 2026-12-02T02:16:56Z.
  S3Address address =
      S3AddressOf({"my-bucket", "zoo/detectron2/Image Net/R-50.pkl"},
                  {{"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000"}, {"AWS_REGION", "eu-west-1"}});
  const tracking::AwsCredentials credentials{
      "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "SESSIONTOKEN"};
  std::tm when{};
  when.tm_year = 2026 - 1900;
  when.tm_mon = 11;
  when.tm_mday = 2;
  when.tm_hour = 2;
  when.tm_min = 16;
  when.tm_sec = 56;
  const auto now = std::chrono::system_clock::from_time_t(timegm(&when));
  const tracking::HeaderList headers =
      SignS3Get(address, {{"Range", "bytes=100-"}}, credentials, now);
  std::map<std::string, std::string> by_name(headers.begin(), headers.end());
  CHECK(by_name["X-Amz-Content-SHA256"] ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(by_name["X-Amz-Date"] == "20261202T021656Z");
  CHECK(by_name["X-Amz-Security-Token"] == "SESSIONTOKEN");
  CHECK(by_name["Authorization"] ==
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/eu-west-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
        "Signature=26f288ec5c3212ef4dcfc7909a48278e5ff02a24ffd7d96681364c61f25b017f");
}

}  // namespace mrcnn::download
