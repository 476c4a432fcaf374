#include "trainer/data/keypoint_flip.h"

#include <map>
#include <stdexcept>

namespace mrcnn::data {
namespace {

// `name` with its first "left" made "right" or its first "right" made "left"; the name
// itself when it has neither.
std::string Mirrored(const std::string& name) {
  const size_t left = name.find("left"), right = name.find("right");
  if (left != std::string::npos && (right == std::string::npos || left < right))
    return name.substr(0, left) + "right" + name.substr(left + 4);
  if (right != std::string::npos)
    return name.substr(0, right) + "left" + name.substr(right + 5);
  return name;
}

}  // namespace

std::vector<int64_t> KeypointFlipIndices(const std::vector<std::string>& names) {
  std::map<std::string, int64_t> index;
  for (size_t k = 0; k < names.size(); ++k) {
    if (!index.emplace(names[k], static_cast<int64_t>(k)).second)
      throw std::invalid_argument("keypoint name \"" + names[k] +
                                  "\" appears twice in a category's \"keypoints\"");
  }
  std::vector<int64_t> flip(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const auto it = index.find(Mirrored(names[k]));
    flip[k] = it == index.end() ? static_cast<int64_t>(k) : it->second;
  }
  return flip;
}

std::vector<std::string> DatasetKeypointNames(const std::vector<CocoCategory>& categories) {
  const CocoCategory* first = nullptr;
  for (const CocoCategory& c : categories) {
    if (c.keypoints.empty())
      continue;
    if (first == nullptr) {
      first = &c;
    } else if (c.keypoints != first->keypoints) {
      throw std::invalid_argument("categories " + std::to_string(first->id) + " and " +
                                  std::to_string(c.id) +
                                  " list different \"keypoints\"; one keypoint head predicts one "
                                  "set of keypoints for every category");
    }
  }
  return first == nullptr ? std::vector<std::string>{} : first->keypoints;
}

}  // namespace mrcnn::data
