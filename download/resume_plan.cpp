#include "download/resume_plan.h"

#include <charconv>
#include <string>

namespace mrcnn::download {
namespace {

std::optional<uint64_t> Number(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

}  // namespace

std::optional<ContentRange> ParseContentRange(std::string_view header) {
  constexpr std::string_view kUnit = "bytes ";
  if (!header.starts_with(kUnit))
    return std::nullopt;
  header.remove_prefix(kUnit.size());
  const size_t slash = header.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  const std::string_view range = header.substr(0, slash);
  const std::string_view total = header.substr(slash + 1);
  ContentRange parsed;
  if (total != "*") {
    parsed.total = Number(total);
    if (!parsed.total)
      return std::nullopt;
  }
  if (range == "*")
    return parsed.total ? std::optional(parsed) : std::nullopt;
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos)
    return std::nullopt;
  parsed.first = Number(range.substr(0, dash));
  parsed.last = Number(range.substr(dash + 1));
  if (!parsed.first || !parsed.last || *parsed.last < *parsed.first)
    return std::nullopt;
  if (parsed.total && *parsed.last >= *parsed.total)
    return std::nullopt;
  return parsed;
}

ResumePlan PlanResume(uint64_t have, unsigned status, std::optional<uint64_t> content_length,
                      std::string_view content_range) {
  if (status == 200)
    return {ResumeAction::kFromStart, content_length};
  const auto range = ParseContentRange(content_range);
  if (status == 206) {
    if (have == 0 || !range || !range->first || *range->first != have) {
      return {ResumeAction::kDiscard, std::nullopt};
    }
    const uint64_t end = *range->last + 1;
    return {ResumeAction::kAppend, range->total ? range->total : std::optional(end)};
  }
  if (status == 416) {
    if (have > 0 && range && !range->first && range->total == have) {
      return {ResumeAction::kComplete, have};
    }
    return {ResumeAction::kDiscard, std::nullopt};
  }
  return {ResumeAction::kNotABody, std::nullopt};
}

}  // namespace mrcnn::download
