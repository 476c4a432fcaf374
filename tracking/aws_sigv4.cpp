#include "tracking/aws_sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <stdexcept>

namespace mrcnn::tracking {
namespace {

// Headers botocore never signs: hop-by-hop ones a proxy may change, and tracing ones.
constexpr std::string_view kUnsignedHeaders[] = {
    "baggage",    "connection",         "expect",
    "keep-alive", "proxy-authenticate", "proxy-authorization",
    "te",         "traceparent",        "tracestate",
    "trailer",    "transfer-encoding",  "upgrade",
    "user-agent", "x-amzn-trace-id"};

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
           &size) == nullptr) {
    throw std::runtime_error("OpenSSL HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<const char*>(out), size);
}

// Whitespace as Python's str.split() sees it in ASCII (botocore's trim).
bool IsSpace(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

// Trimmed, each inner run of whitespace one space.
std::string TrimAll(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (const char c : value) {
    if (IsSpace(static_cast<unsigned char>(c))) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) {
      out += ' ';
      pending_space = false;
    }
    out += c;
  }
  return out;
}

// RFC 3986 section 5.2.4, and empty segments dropped (AWS wants "//" collapsed).
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> kept;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, end - start);
    if (segment == "..") {
      if (!kept.empty()) {
        kept.pop_back();
      }
    } else if (!segment.empty() && segment != ".") {
      kept.push_back(segment);
    }
    start = end + 1;
  }
  std::string out = "/";
  for (size_t i = 0; i < kept.size(); ++i) {
    out += kept[i];
    if (i + 1 < kept.size()) {
      out += '/';
    }
  }
  if (!kept.empty() && path.back() == '/') {
    out += '/';
  }
  return out;
}

std::string AmzDate(std::chrono::system_clock::time_point now) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[17];
  std::strftime(text, sizeof(text), "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

}  // namespace

std::string PercentEncode(std::string_view text, std::string_view also_keep) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' ||
        also_keep.find(c) != std::string_view::npos) {
      out += c;
    } else {
      out += '%';
      out += kDigits[byte >> 4];
      out += kDigits[byte & 15];
    }
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL SHA-256 failed");
  }
  return Hex(digest, size);
}

namespace {

using QueryPairs = std::vector<std::pair<std::string, std::string>>;

QueryPairs EncodedPairs(const QueryPairs& query) {
  QueryPairs out;
  out.reserve(query.size());
  for (const auto& [name, value] : query) {
    out.emplace_back(PercentEncode(name), PercentEncode(value));
  }
  return out;
}

std::string JoinPairs(const QueryPairs& encoded) {
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) {
      out += '&';
    }
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

// "name:value1,value2\n" per header, by name; `names` gets "a;b;c".
std::string CanonicalHeaders(const std::map<std::string, std::vector<std::string>>& headers,
                             std::string& names) {
  std::string out;
  for (const auto& [name, values] : headers) {
    out += name + ":";
    for (size_t i = 0; i < values.size(); ++i) {
      out += (i > 0 ? "," : "") + values[i];
    }
    out += '\n';
    names += (names.empty() ? "" : ";") + name;
  }
  return out;
}

}  // namespace

std::string EncodeSigV4Query(const QueryPairs& query) {
  return JoinPairs(EncodedPairs(query));
}

SigV4Signature SignSigV4(const SignableRequest& request, const AwsCredentials& credentials,
                         const SigV4Scope& scope, std::chrono::system_clock::time_point now) {
  if (request.method.empty() || request.host.empty() || scope.region.empty() ||
      scope.service.empty() || credentials.access_key_id.empty() ||
      credentials.secret_access_key.empty()) {
    throw std::invalid_argument(
        "SigV4: the method, host, region, service, access key id and secret key must all be set");
  }
  if (request.path.empty() || request.path.front() != '/') {
    throw std::invalid_argument("SigV4: the path must start with '/', got \"" + request.path +
                                "\"");
  }
  const std::string timestamp = AmzDate(now);
  const std::string date = timestamp.substr(0, 8);

  // What is signed: the caller's headers less those the signer sets, then the signer's own.
  HeaderList added = {{"X-Amz-Date", timestamp}};
  if (!credentials.session_token.empty()) {
    added.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }
  std::map<std::string, std::vector<std::string>> signed_headers;  // sorted by name
  std::string payload_hash;
  bool has_host = false;
  for (const auto& [name, value] : request.headers) {
    const std::string lower = Lower(name);
    if (lower == "date") {
      throw std::invalid_argument(
          "SigV4: the request has a Date header; the signer sets X-Amz-Date");
    }
    if (lower == "authorization" || lower == "x-amz-date" ||
        (lower == "x-amz-security-token" && !credentials.session_token.empty())) {
      continue;  // replaced below, as botocore replaces them
    }
    if (lower == "x-amz-content-sha256") {
      payload_hash = value;
    }
    has_host = has_host || lower == "host";
    if (std::find(std::begin(kUnsignedHeaders), std::end(kUnsignedHeaders), lower) ==
        std::end(kUnsignedHeaders)) {
      signed_headers[lower].push_back(TrimAll(value));
    }
  }
  for (const auto& [name, value] : added) {
    signed_headers[Lower(name)].push_back(value);
  }
  if (!has_host) {
    signed_headers["host"].push_back(Lower(request.host));
  }
  if (payload_hash.empty()) {
    payload_hash = Sha256Hex(request.body);
  }

  QueryPairs query = EncodedPairs(request.query);
  std::sort(query.begin(), query.end());  // by encoded name, then value
  const std::string canonical_query = JoinPairs(query);
  std::string signed_names;
  const std::string canonical_headers = CanonicalHeaders(signed_headers, signed_names);

  SigV4Signature result;
  std::string method = request.method;
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  // S3 signs the path exactly as it is sent (botocore's S3SigV4Auth): object keys may hold
  // "//" or "..", and the sender has already percent-encoded them once.
  const std::string canonical_path = scope.service == "s3"
                                         ? request.path
                                         : PercentEncode(RemoveDotSegments(request.path), "/");
  result.canonical_request = method + "\n" + canonical_path + "\n" + canonical_query + "\n" + canonical_headers + "\n" +
                             signed_names + "\n" + payload_hash;
  const std::string credential_scope =
      date + "/" + scope.region + "/" + scope.service + "/aws4_request";
  result.string_to_sign = "AWS4-HMAC-SHA256\n" + timestamp + "\n" + credential_scope + "\n" +
                          Sha256Hex(result.canonical_request);
  std::string key = HmacSha256("AWS4" + credentials.secret_access_key, date);
  key = HmacSha256(key, scope.region);
  key = HmacSha256(key, scope.service);
  key = HmacSha256(key, "aws4_request");
  const std::string signature = HmacSha256(key, result.string_to_sign);
  result.signature =
      Hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
  result.headers = std::move(added);
  result.headers.emplace_back("Authorization",
                              "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" +
                                  credential_scope + ", SignedHeaders=" + signed_names +
                                  ", Signature=" + result.signature);
  return result;
}

}  // namespace mrcnn::tracking
