#include "serving/codec/request_decoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "serving/http/http_error.h"

namespace mrcnn::serving {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Splits on `separator`, trimming each piece.
std::vector<std::string_view> Split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = s.find(separator);
    parts.push_back(Trim(s.substr(0, at)));
    if (at == std::string_view::npos) {
      return parts;
    }
    s.remove_prefix(at + 1);
  }
}

// Media type without parameters, lower-cased.
std::string MediaType(std::string_view header_value) {
  return Lower(Trim(header_value.substr(0, header_value.find(';'))));
}

constexpr std::string_view kSupportedTypes =
    "image/jpeg, image/png, application/x-image, application/json or application/jsonlines";

bool IsJsonLinesType(std::string_view type) {
  return type == "application/jsonlines" || type == "application/jsonl" ||
         type == "application/x-jsonlines";
}

// true for `yes`, false for `no` (any case); anything else is a 400 naming the key.
bool ParseChoice(std::string_view value, std::string_view key, std::string_view yes,
                 std::string_view no) {
  const std::string mode = Lower(value);
  if (mode == yes || mode == no) {
    return mode == yes;
  }
  throw HttpError(
      400, "bad_custom_attributes",
      fmt::format("{} must be \"{}\" or \"{}\", got \"{}\"", key, yes, no, std::string(value)));
}

}  // namespace

BodyKind ClassifyContentType(std::string_view content_type) {
  const std::string type = MediaType(content_type);
  if (type == "image/jpeg" || type == "image/jpg" || type == "image/png" ||
      type == "application/x-image") {
    return BodyKind::kImage;
  }
  if (type == "application/json") {
    return BodyKind::kJson;
  }
  if (IsJsonLinesType(type)) {
    return BodyKind::kJsonLines;
  }
  if (type.empty()) {
    throw HttpError(
        415, "unsupported_media_type",
        fmt::format("the request has no Content-Type; send one of {}", kSupportedTypes));
  }
  throw HttpError(415, "unsupported_media_type",
                  fmt::format("Content-Type \"{}\" is not supported; send one of {}",
                              std::string(content_type.substr(0, 200)), kSupportedTypes));
}

std::string_view ResponseMediaType(BodyKind kind) {
  return kind == BodyKind::kJsonLines ? "application/jsonlines" : "application/json";
}

void RequireJsonAcceptable(std::string_view accept) {
  RequireAcceptable(accept, "application/json");
}

void RequireAcceptable(std::string_view accept, std::string_view media_type) {
  if (Trim(accept).empty()) {
    return;
  }
  const std::string_view family = media_type.substr(0, media_type.find('/'));
  for (std::string_view range : Split(accept, ',')) {
    const auto params = Split(range, ';');
    const std::string type = Lower(params.front());
    const bool admits =
        type == "*/*" || type == media_type ||
        (type.size() == family.size() + 2 && type.rfind(family, 0) == 0 && type.ends_with("/*")) ||
        (IsJsonLinesType(type) && IsJsonLinesType(media_type));
    if (!admits) {
      continue;
    }
    double quality = 1.0;
    for (size_t i = 1; i < params.size(); ++i) {
      const std::string param = Lower(params[i]);
      if (param.rfind("q=", 0) == 0) {
        const std::string_view value = std::string_view(param).substr(2);
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), quality);
        if (ec != std::errc() || end != value.data() + value.size()) {
          quality = 0.0;  // an unreadable quality admits nothing
        }
      }
    }
    if (quality > 0.0) {
      return;
    }
  }
  throw HttpError(406, "not_acceptable",
                  fmt::format("Accept \"{}\" does not admit {}, the response type for this "
                              "request's Content-Type",
                              std::string(accept.substr(0, 200)), std::string(media_type)));
}

bool ApplyPredictOption(PredictOptions& options, std::string_view key_text, std::string_view value,
                        int max_detections_cap) {
  const std::string key = Lower(Trim(key_text));
  value = Trim(value);
  const char* first = value.data();
  const char* last = value.data() + value.size();
  if (key == "score_threshold") {
    float threshold = -1.0f;
    auto [end, ec] = std::from_chars(first, last, threshold);
    if (ec != std::errc() || end != last || !(threshold >= 0.0f && threshold <= 1.0f)) {
      throw HttpError(400, "bad_custom_attributes",
                      fmt::format("score_threshold must be a number in [0, 1], got \"{}\"",
                                  std::string(value)));
    }
    options.score_threshold = threshold;
  } else if (key == "max_detections") {
    int count = 0;
    auto [end, ec] = std::from_chars(first, last, count);
    if (ec != std::errc() || end != last || count < 1 || count > max_detections_cap) {
      throw HttpError(400, "bad_custom_attributes",
                      fmt::format("max_detections must be an integer in [1, {}], got \"{}\"",
                                  max_detections_cap, std::string(value)));
    }
    options.max_detections = count;
    options.tiled_max_detections = count;  // the request's own cap holds for tiles too
  } else if (key == "masks") {
    options.masks = ParseChoice(value, "masks", "rle", "none");
  } else if (key == "tile_size") {
    int64_t size = -1;
    auto [end, ec] = std::from_chars(first, last, size);
    if (ec != std::errc() || end != last || size < 0 || size > kMaxTileSize) {
      throw HttpError(400, "bad_custom_attributes",
                      fmt::format("tile_size must be an integer in [0, {}] (pixels; 0: no "
                                  "tiling), got \"{}\"",
                                  kMaxTileSize, std::string(value)));
    }
    options.tile_size = size;
  } else if (key == "tile_overlap") {
    float overlap = -1.0f;
    auto [end, ec] = std::from_chars(first, last, overlap);
    if (ec != std::errc() || end != last || !(overlap >= 0.0f && overlap <= 0.9f)) {
      throw HttpError(400, "bad_custom_attributes",
                      fmt::format("tile_overlap must be a number in [0, 0.9] (the fraction of a "
                                  "tile its neighbours share), got \"{}\"",
                                  std::string(value)));
    }
    options.tile_overlap = overlap;
  } else if (key == "tile_full_image") {
    options.tile_full_image = ParseChoice(value, "tile_full_image", "true", "false");
  } else {
    return false;
  }
  return true;
}

PredictOptions ParseCustomAttributes(std::string_view header, const PredictOptions& defaults,
                                     int max_detections_cap) {
  if (header.size() > 1024) {
    throw HttpError(400, "bad_custom_attributes",
                    fmt::format("X-Amzn-SageMaker-Custom-Attributes is {} characters; the limit is "
                                "1024",
                                header.size()));
  }
  for (char c : header) {
    if (c < 0x20 || c > 0x7E) {
      throw HttpError(400, "bad_custom_attributes",
                      "X-Amzn-SageMaker-Custom-Attributes must be visible ASCII");
    }
  }
  PredictOptions options = defaults;
  for (std::string_view item : Split(header, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos) {
      ApplyPredictOption(options, item.substr(0, eq), item.substr(eq + 1), max_detections_cap);
    }
  }
  return options;
}

}  // namespace mrcnn::serving
