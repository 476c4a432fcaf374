#include "download/md5_name.h"

#include <regex>

namespace mrcnn::download {

std::optional<std::string> Md5PrefixInName(std::string_view file_name) {
  static const std::regex pattern(R"(model_(?:final|[0-9]{7})_([0-9a-f]{6,32})\.pkl)");
  std::match_results<std::string_view::const_iterator> match;
  if (!std::regex_match(file_name.begin(), file_name.end(), match, pattern))
    return std::nullopt;
  return match[1].str();
}

bool Md5MatchesPrefix(std::string_view md5_hex, std::string_view prefix) {
  return !prefix.empty() && md5_hex.starts_with(prefix);
}

}  // namespace mrcnn::download
