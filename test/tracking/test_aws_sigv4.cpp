// The SigV4 signer against AWS's published Signature Version 4 test suite (the requests of
// aws-sig-v4-test-suite, as botocore's tests carry it: credentials AKIDEXAMPLE, us-east-1,
// service "service", 2015-08-30T12:36:00Z; each case's expected signature is the suite's).
// The case where the token is added after signing is left out: neither botocore nor we sign
// that way. test_sigv4_botocore.py compares with botocore on our own requests.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tracking/aws_sigv4.h"

using namespace mrcnn::tracking;

namespace {

struct SuiteCase {
  const char* name;
  const char* method;
  const char* path;
  std::vector<std::pair<std::string, std::string>> query;
  HeaderList headers;
  const char* body;
  const char* session_token;
  const char* signature;
};

std::chrono::system_clock::time_point SuiteTime() {
  // 2015-08-30T12:36:00Z
  return std::chrono::system_clock::time_point(std::chrono::seconds(1440938160));
}

const AwsCredentials kSuiteKeys{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};

}  // namespace

TEST_CASE("SigV4 signs AWS's test suite requests with the suite's signatures",
          "[tracking][sigv4]") {
  const std::vector<SuiteCase> cases = {
      {"get-header-key-duplicate",
       "GET",
       "/",
       {},
       {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
       "",
       "",
       "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
      {"get-header-value-multiline",
       "GET",
       "/",
       {},
       {{"My-Header1", "value1\n  value2\n     value3"}},
       "",
       "",
       "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd"},
      {"get-header-value-order",
       "GET",
       "/",
       {},
       {{"My-Header1", "value4"},
        {"My-Header1", "value1"},
        {"My-Header1", "value3"},
        {"My-Header1", "value2"}},
       "",
       "",
       "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
      {"get-header-value-trim",
       "GET",
       "/",
       {},
       {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}},
       "",
       "",
       "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
      {"get-unreserved",
       "GET",
       "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
       {},
       {},
       "",
       "",
       "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
      {"get-utf8",
       "GET",
       "/\xe1\x88\xb4",
       {},
       {},
       "",
       "",
       "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
      {"get-vanilla-empty-query-key",
       "GET",
       "/",
       {{"Param1", "value1"}},
       {},
       "",
       "",
       "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
      {"get-vanilla-query-order-encoded",
       "GET",
       "/",
       {{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xe1\x88\xb4", "Value1"}},
       {},
       "",
       "",
       "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"},
      {"get-vanilla-query-order-key-case",
       "GET",
       "/",
       {{"Param2", "value2"}, {"Param1", "value1"}},
       {},
       "",
       "",
       "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
      {"get-vanilla-query-order-key",
       "GET",
       "/",
       {{"Param1", "value2"}, {"Param1", "Value1"}},
       {},
       "",
       "",
       "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"},
      {"get-vanilla-query-order-value",
       "GET",
       "/",
       {{"Param1", "value2"}, {"Param1", "value1"}},
       {},
       "",
       "",
       "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"},
      {"get-vanilla-query-unreserved",
       "GET",
       "/",
       {{"-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
         "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}},
       {},
       "",
       "",
       "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
      {"get-vanilla-query",
       "GET",
       "/",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-vanilla-utf8-query",
       "GET",
       "/",
       {{"\xe1\x88\xb4", "bar"}},
       {},
       "",
       "",
       "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
      {"get-vanilla-with-session-token",
       "GET",
       "/",
       {},
       {},
       "",
       "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
       "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
      {"get-vanilla",
       "GET",
       "/",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-relative-relative",
       "GET",
       "/example1/example2/../..",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-relative",
       "GET",
       "/example/..",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-slash-dot-slash",
       "GET",
       "/./",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-slash-pointless-dot",
       "GET",
       "/./example",
       {},
       {},
       "",
       "",
       "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"},
      {"get-slash",
       "GET",
       "//",
       {},
       {},
       "",
       "",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-slashes",
       "GET",
       "//example//",
       {},
       {},
       "",
       "",
       "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"},
      {"get-space",
       "GET",
       "/example space/",
       {},
       {},
       "",
       "",
       "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
      {"get-special-character",
       "GET",
       "/example/$delete",
       {},
       {},
       "",
       "",
       "a853c9b21b528b19643d00910d35b83a10c366a10833ceefb45edd6c80e40f27"},
      {"post-header-key-case",
       "POST",
       "/",
       {},
       {},
       "",
       "",
       "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
      {"post-header-key-sort",
       "POST",
       "/",
       {},
       {{"My-Header1", "value1"}},
       "",
       "",
       "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
      {"post-header-value-case",
       "POST",
       "/",
       {},
       {{"My-Header1", "VALUE1"}},
       "",
       "",
       "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
      {"post-sts-header-before",
       "POST",
       "/",
       {},
       {{"X-Amz-Security-Token",
         "AQoDYXdzEPT//////////"
         "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUu"
         "wthAx7mSEI/qkPpKPi/"
         "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8Y"
         "QcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
         "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="}},
       "",
       "",
       "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
      {"post-vanilla-empty-query-value",
       "POST",
       "/",
       {{"Param1", "value1"}},
       {},
       "",
       "",
       "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
      {"post-vanilla-query",
       "POST",
       "/",
       {{"Param1", "value1"}},
       {},
       "",
       "",
       "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
      {"post-vanilla",
       "POST",
       "/",
       {},
       {},
       "",
       "",
       "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
      {"post-x-www-form-urlencoded-parameters",
       "POST",
       "/",
       {},
       {{"Content-Type", "application/x-www-form-urlencoded; charset=utf8"}},
       "Param1=value1",
       "",
       "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe"},
      {"post-x-www-form-urlencoded",
       "POST",
       "/",
       {},
       {{"Content-Type", "application/x-www-form-urlencoded"}},
       "Param1=value1",
       "",
       "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
  };
  REQUIRE(cases.size() == 33);
  for (const SuiteCase& suite : cases) {
    INFO(suite.name);
    SignableRequest request;
    request.method = suite.method;
    request.host = "example.amazonaws.com";
    request.path = suite.path;
    request.query = suite.query;
    request.headers = suite.headers;
    request.body = suite.body;
    AwsCredentials credentials = kSuiteKeys;
    credentials.session_token = suite.session_token;
    const SigV4Signature signed_request =
        SignSigV4(request, credentials, {"us-east-1", "service"}, SuiteTime());
    INFO(signed_request.canonical_request);
    CHECK(signed_request.signature == suite.signature);
    std::string authorization;
    for (const auto& [name, value] : signed_request.headers) {
      if (name == "Authorization") {
        authorization = value;
      }
    }
    CHECK(authorization.starts_with(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders="));
    CHECK(authorization.ends_with(std::string(", Signature=") + suite.signature));
  }
}

TEST_CASE("SigV4's canonical request spells paths, queries and headers as AWS wants",
          "[tracking][sigv4]") {
  SignableRequest request;
  request.method = "get";
  request.host = "Example.AmazonAWS.com";
  request.path = "/a b/./c/../d%2F";
  request.query = {{"z", "1 2"}, {"a", "x/y"}, {"a", "w"}};
  request.headers = {{"User-Agent", "mrcnn"},
                     {"Connection", "keep-alive"},
                     {"X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"},
                     {"Content-Type", " a\t b "}};
  const SigV4Signature signed_request =
      SignSigV4(request, {"AK", "SK", "TOKEN"}, {"eu-west-1", "sagemaker-mlflow"}, SuiteTime());
  CHECK(signed_request.canonical_request ==
        "GET\n"
        "/a%20b/d%252F\n"
        "a=w&a=x%2Fy&z=1%202\n"
        "content-type:a b\n"
        "host:example.amazonaws.com\n"
        "x-amz-content-sha256:UNSIGNED-PAYLOAD\n"
        "x-amz-date:20150830T123600Z\n"
        "x-amz-security-token:TOKEN\n"
        "\n"
        "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token\n"
        "UNSIGNED-PAYLOAD");
  CHECK(signed_request.string_to_sign.starts_with(
      "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/eu-west-1/sagemaker-mlflow/aws4_request\n"));
  CHECK(signed_request.headers.size() == 3);  // X-Amz-Date, X-Amz-Security-Token, Authorization
  CHECK(EncodeSigV4Query(request.query) == "z=1%202&a=x%2Fy&a=w");
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("SigV4 refuses requests it cannot sign", "[tracking][sigv4]") {
  SignableRequest request{"GET", "example.com", "/", {}, {}, ""};
  CHECK_THROWS_AS(SignSigV4(request, {"", "SK", ""}, {"r", "s"}, SuiteTime()),
                  std::invalid_argument);
  CHECK_THROWS_AS(SignSigV4(request, {"AK", "SK", ""}, {"", "s"}, SuiteTime()),
                  std::invalid_argument);
  request.path = "relative";
  CHECK_THROWS_AS(SignSigV4(request, {"AK", "SK", ""}, {"r", "s"}, SuiteTime()),
                  std::invalid_argument);
  request.path = std::string(1, '/');  // not = "/": GCC 12's -Wrestrict false positive (105651)
  request.headers = {{"Date", "Sun, 30 Aug 2015 12:36:00 GMT"}};
  CHECK_THROWS_AS(SignSigV4(request, {"AK", "SK", ""}, {"r", "s"}, SuiteTime()),
                  std::invalid_argument);
}
