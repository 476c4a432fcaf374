#include "trainer/data/coco_json_fields.h"

namespace mrcnn::data {
namespace {

bool CheckNumber(JsonCursor& cur, std::string_view key, std::string* problem) {
  const auto kind = cur.Peek();
  if (kind == JsonCursor::Kind::kNumber)
    return true;
  if (problem->empty()) {
    problem->append("\"").append(key).append("\" must be a number, found ");
    problem->append(JsonCursor::KindName(kind));
  }
  cur.Skip();
  return false;
}

void Note(std::string* problem, const char* what) {
  if (problem->empty())
    problem->assign(what);
}

CocoPolygons ReadPolygons(JsonCursor& cur, std::string* problem) {
  CocoPolygons polys;
  cur.ForEachElement([&](size_t) {
    if (cur.Peek() != JsonCursor::Kind::kArray) {
      Note(problem, "\"segmentation\" polygons must be arrays of numbers");
      cur.Skip();
      return;
    }
    std::vector<double> poly;
    cur.ForEachElement([&](size_t) {
      if (auto v = ReadNumberField(cur, "segmentation", problem))
        poly.push_back(*v);
    });
    polys.push_back(std::move(poly));
  });
  return polys;
}

CocoSegmentation ReadRle(JsonCursor& cur, std::string* problem) {
  std::string counts_str, scratch;
  std::vector<uint32_t> counts;
  bool compressed = false, has_counts = false;
  int64_t size[2] = {-1, -1};
  int size_values = 0;
  cur.ForEachMember([&](std::string_view key) {
    if (key == "counts") {
      has_counts = true;
      const auto kind = cur.Peek();
      if (kind == JsonCursor::Kind::kString) {
        compressed = true;
        counts_str = std::string(cur.String(&scratch));
      } else if (kind == JsonCursor::Kind::kArray) {
        cur.ForEachElement([&](size_t) {
          auto v = ReadIntegerField(cur, "counts", problem);
          if (v && (*v < 0 || *v > int64_t{UINT32_MAX})) {
            Note(problem, "RLE count out of range 0..2^32-1");
          } else if (v) {
            counts.push_back(static_cast<uint32_t>(*v));
          }
        });
      } else {
        Note(problem, "RLE \"counts\" must be a string or an array");
        cur.Skip();
      }
    } else if (key == "size") {
      if (cur.Peek() != JsonCursor::Kind::kArray) {
        Note(problem, "RLE \"size\" must be [height, width]");
        cur.Skip();
        return;
      }
      cur.ForEachElement([&](size_t i) {
        auto v = ReadIntegerField(cur, "size", problem);
        if (v && i < 2)
          size[i] = *v;
        ++size_values;
      });
    } else {
      cur.Skip();
    }
  });
  if (!problem->empty())
    return {};
  if (!has_counts || size_values != 2 || size[0] < 0 || size[1] < 0) {
    Note(problem, "RLE segmentation needs \"counts\" and \"size\": [height, width]");
    return {};
  }
  try {
    return compressed ? RleFromString(counts_str, size[0], size[1])
                      : RleFromUncompressed(counts, size[0], size[1]);
  } catch (const std::exception& e) {
    problem->assign("bad RLE segmentation: ").append(e.what());
    return {};
  }
}

}  // namespace

std::optional<double> ReadNumberField(JsonCursor& cur, std::string_view key, std::string* problem) {
  if (!CheckNumber(cur, key, problem))
    return std::nullopt;
  return cur.Number();
}

std::optional<int64_t> ReadIntegerField(JsonCursor& cur, std::string_view key,
                                        std::string* problem) {
  if (!CheckNumber(cur, key, problem))
    return std::nullopt;
  return cur.Integer();
}

CocoSegmentation ReadSegmentationField(JsonCursor& cur, std::string* problem) {
  const auto kind = cur.Peek();
  if (kind == JsonCursor::Kind::kArray)
    return ReadPolygons(cur, problem);
  if (kind == JsonCursor::Kind::kObject)
    return ReadRle(cur, problem);
  if (kind != JsonCursor::Kind::kNull) {
    Note(problem, "\"segmentation\" must be polygons or an RLE object");
  }
  cur.Skip();
  return {};
}

}  // namespace mrcnn::data
