// SplitInvocationBody and SplitInvocationBodyInPlace (request_decoding.h): the image and JSON
// bodies of /invocations -> encoded images.
#include <fmt/format.h>

#include <deque>
#include <optional>
#include <stdexcept>
#include <string>

#include "serving/codec/base64.h"
#include "serving/codec/request_decoding.h"
#include "serving/http/http_error.h"
#include "trainer/data/json_cursor.h"

namespace mrcnn::serving {

namespace {

using data::JsonCursor;

// One image of a JSON body as found by the walk: its base64 text, or why there is none.
struct FoundImage {
  std::optional<std::string_view> base64;  // into the body, or into an unescaped copy
  enum class Problem { kNone, kNoImage, kNotString } problem = Problem::kNone;
};

// The value at the cursor as an image: an object's "image" member, or the value itself.
FoundImage FindImage(JsonCursor& cursor, std::deque<std::string>& unescaped) {
  FoundImage found;
  auto take_string = [&] {
    std::string scratch;
    std::string_view text = cursor.String(&scratch);
    if (!scratch.empty() && text.data() == scratch.data()) {
      text = unescaped.emplace_back(std::move(scratch));  // had escapes: keep the copy alive
    }
    found.base64 = text;
    found.problem = FoundImage::Problem::kNone;
  };
  const JsonCursor::Kind kind = cursor.Peek();
  if (kind == JsonCursor::Kind::kString) {
    take_string();
  } else if (kind == JsonCursor::Kind::kObject) {
    found.problem = FoundImage::Problem::kNoImage;
    cursor.ForEachMember([&](std::string_view key) {
      if (key != "image") {
        cursor.Skip();
      } else if (cursor.Peek() == JsonCursor::Kind::kString) {
        take_string();
      } else {
        cursor.Skip();
        found.base64.reset();
        found.problem = FoundImage::Problem::kNotString;
      }
    });
  } else {
    cursor.Skip();
    found.problem = FoundImage::Problem::kNotString;
  }
  return found;
}

// Base64 -> bytes: in place when the text lies inside the mutable body, else into `owned`.
std::span<const uint8_t> DecodeFound(const FoundImage& found, size_t index,
                                     std::span<uint8_t> mutable_body, EncodedImages& out) {
  if (found.problem == FoundImage::Problem::kNoImage) {
    throw HttpError(400, "bad_json_body",
                    fmt::format("instance {} has no \"image\" field (expected {{\"image\": "
                                "\"<base64 JPEG or PNG>\"}})",
                                index));
  }
  if (found.problem != FoundImage::Problem::kNone || !found.base64) {
    throw HttpError(400, "bad_json_body",
                    fmt::format("instance {}: \"image\" must be a base64 string", index));
  }
  const std::string_view text = *found.base64;
  const auto* first = reinterpret_cast<const uint8_t*>(text.data());
  if (!mutable_body.empty() && first >= mutable_body.data() &&
      first + text.size() <= mutable_body.data() + mutable_body.size()) {
    const auto encoded =
        mutable_body.subspan(static_cast<size_t>(first - mutable_body.data()), text.size());
    if (const auto size = DecodeBase64InPlace(encoded)) {
      return encoded.first(*size);
    }
  } else if (auto bytes = DecodeBase64(text)) {
    out.owned.push_back(std::move(*bytes));
    return out.owned.back();
  }
  throw HttpError(400, "bad_base64",
                  fmt::format("instance {}: \"image\" is not valid base64", index));
}

// Walks the JSON body without building a DOM: a large base64 image is read where it lies,
// never copied into a JSON string first.
EncodedImages SplitJsonBody(std::span<const uint8_t> body, std::span<uint8_t> mutable_body,
                            size_t max_images) {
  const std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  JsonCursor cursor(text, "JSON body");
  std::deque<std::string> unescaped;
  std::vector<FoundImage> instances;
  std::optional<FoundImage> single;
  bool list_form = false;
  bool instances_not_list = false;
  try {
    auto read_list = [&] {
      list_form = true;
      instances.clear();
      cursor.ForEachElement([&](size_t) { instances.push_back(FindImage(cursor, unescaped)); });
    };
    const JsonCursor::Kind kind = cursor.Peek();
    if (kind == JsonCursor::Kind::kArray) {
      read_list();
    } else if (kind == JsonCursor::Kind::kObject) {
      cursor.ForEachMember([&](std::string_view key) {
        if (key == "instances") {
          instances_not_list = cursor.Peek() != JsonCursor::Kind::kArray;
          if (instances_not_list) {
            cursor.Skip();
            list_form = true;
          } else {
            read_list();
          }
        } else if (key == "image") {
          // The object itself is the instance: its "image" member, as for a list item.
          FoundImage found;
          if (cursor.Peek() == JsonCursor::Kind::kString) {
            found = FindImage(cursor, unescaped);
          } else {
            cursor.Skip();
            found.problem = FoundImage::Problem::kNotString;
          }
          single = found;
        } else {
          cursor.Skip();
        }
      });
    } else {
      cursor.Skip();
    }
    cursor.ExpectEnd();
  } catch (const std::runtime_error&) {  // the cursor's syntax errors
    throw HttpError(400, "bad_json_body",
                    "the body is not valid JSON; send {\"image\": \"<base64>\"}, "
                    "{\"instances\": [{\"image\": ...}, ...]} or [{\"image\": ...}, ...]");
  }
  EncodedImages out;
  if (instances_not_list) {
    throw HttpError(400, "bad_json_body", "\"instances\" must be a list");
  }
  if (!list_form) {
    if (!single) {
      throw HttpError(400, "bad_json_body",
                      "expected {\"image\": \"<base64>\"}, {\"instances\": [...]} or a list of "
                      "{\"image\": ...} objects");
    }
    out.images.push_back(DecodeFound(*single, 0, mutable_body, out));
    return out;
  }
  out.list_form = true;
  if (instances.empty()) {
    throw HttpError(400, "bad_json_body", "the list of instances is empty");
  }
  if (instances.size() > max_images) {
    throw HttpError(400, "too_many_images",
                    fmt::format("{} images in one request; the limit is {} (server flag "
                                "--max-images-per-request)",
                                instances.size(), max_images));
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    out.images.push_back(DecodeFound(instances[i], i, mutable_body, out));
  }
  return out;
}

}  // namespace

EncodedImages SplitInvocationBody(BodyKind kind, std::span<const uint8_t> body, size_t max_images) {
  if (kind == BodyKind::kJsonLines) {
    throw std::invalid_argument("SplitInvocationBody: JSON lines are split by SplitJsonLines");
  }
  if (kind == BodyKind::kImage) {
    EncodedImages out;
    out.images.push_back(body);
    return out;
  }
  return SplitJsonBody(body, {}, max_images);
}

EncodedImages SplitInvocationBodyInPlace(BodyKind kind, std::span<uint8_t> body,
                                         size_t max_images) {
  if (kind != BodyKind::kJson) {
    return SplitInvocationBody(kind, body, max_images);
  }
  return SplitJsonBody(body, body, max_images);
}

}  // namespace mrcnn::serving
