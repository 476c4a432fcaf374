// Slurm hostlist expansion: "algo-[1-3,5],gpu[01-02]-ib" -> algo-1 algo-2 algo-3
// algo-5 gpu01-ib gpu02-ib. Ranges keep the zero padding of their lower bound;
// several bracket groups in one name expand as a cartesian product.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/config_error.h"
#include "common/world.h"

namespace mrcnn::common {
namespace {

constexpr size_t kMaxHosts = 1'000'000;  // a typo like [1-999999999] must not exhaust memory

[[noreturn]] void Fail(const std::string& nodelist, const std::string& problem) {
  throw ConfigError(
      "environment", "SLURM_JOB_NODELIST",
      fmt::format("is not a valid Slurm host list ({}), got \"{}\"", problem, nodelist));
}

bool AllDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// "1-3,5,07-09" -> {"1","2","3","5","07","08","09"}
std::vector<std::string> ExpandRanges(const std::string& body, const std::string& nodelist) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const auto comma = body.find(',', start);
    const std::string part =
        body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 9 || hi.size() > 9) {
      Fail(nodelist,
           fmt::format("range \"{}\" must be N or N-M with N, M non-negative integers", part));
    }
    const long first = std::stol(lo);
    const long last = std::stol(hi);
    if (last < first)
      Fail(nodelist, fmt::format("range \"{}\" runs backwards", part));
    if (out.size() + static_cast<size_t>(last - first + 1) > kMaxHosts)
      Fail(nodelist, "too many hosts");
    for (long n = first; n <= last; ++n)
      out.push_back(fmt::format("{:0{}d}", n, lo.size()));
    if (comma == std::string::npos)
      return out;
    start = comma + 1;
  }
}

void ExpandName(const std::string& name, const std::string& nodelist,
                std::vector<std::string>& hosts) {
  std::vector<std::string> partial = {""};
  size_t pos = 0;
  while (pos < name.size()) {
    const auto open = name.find('[', pos);
    const std::string literal =
        name.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (literal.find(']') != std::string::npos)
      Fail(nodelist, "']' without '['");
    for (auto& p : partial)
      p += literal;
    if (open == std::string::npos)
      break;
    const auto close = name.find(']', open);
    if (close == std::string::npos)
      Fail(nodelist, "'[' without ']'");
    const auto values = ExpandRanges(name.substr(open + 1, close - open - 1), nodelist);
    if (partial.size() * values.size() > kMaxHosts)
      Fail(nodelist, "too many hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * values.size());
    for (const auto& p : partial) {
      for (const auto& v : values)
        next.push_back(p + v);
    }
    partial = std::move(next);
    pos = close + 1;
  }
  if (partial.size() == 1 && partial.front().empty())
    Fail(nodelist, "empty host name");
  for (auto& p : partial)
    hosts.push_back(std::move(p));
}

}  // namespace

std::vector<std::string> ExpandSlurmNodeList(const std::string& nodelist) {
  std::vector<std::string> hosts;
  std::string name;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') {
      if (++depth > 1)
        Fail(nodelist, "nested '['");
    } else if (c == ']') {
      if (--depth < 0)
        Fail(nodelist, "']' without '['");
    }
    if (c == ',' && depth == 0) {
      ExpandName(name, nodelist, hosts);
      name.clear();
    } else {
      name.push_back(c);
    }
  }
  if (depth != 0)
    Fail(nodelist, "'[' without ']'");
  ExpandName(name, nodelist, hosts);
  return hosts;
}

}  // namespace mrcnn::common
