#pragma once
// One fuzz input holding several documents (a COCO file and a results file, four config
// files, a YAML file and opts): the parts are separated by the line "====", so seeds stay
// readable and mutations that keep the separator keep the parts apart.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mrcnn::fuzz {

inline std::vector<std::string_view> SplitFuzzInput(const uint8_t* data, size_t size) {
  static constexpr std::string_view kSeparator = "\n====\n";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = input.find(kSeparator, start);
    if (end == std::string_view::npos) {
      parts.push_back(input.substr(start));
      return parts;
    }
    parts.push_back(input.substr(start, end - start));
    start = end + kSeparator.size();
  }
}

}  // namespace mrcnn::fuzz
