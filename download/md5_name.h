#pragma once
// Detectron2's model zoo names its files after their content: model_final_<hex>.pkl and
// model_<7 digits>_<hex>.pkl, where <hex> is the start of the file's md5 (6 characters in
// the zoo's table, all 32 in a few quick-schedule files). The downloader checks it, which
// Detectron2 itself never does.
#include <optional>
#include <string>
#include <string_view>

namespace mrcnn::download {

// The md5 prefix `file_name` carries (lower-case hex, 6 to 32 characters), or nullopt when
// the name is not of that form ("R-50.pkl", "model_final.pth", "model_final_r101_c4.pkl").
std::optional<std::string> Md5PrefixInName(std::string_view file_name);

// Whether `md5_hex` (32 lower-case hex characters) starts with `prefix`.
bool Md5MatchesPrefix(std::string_view md5_hex, std::string_view prefix);

}  // namespace mrcnn::download
