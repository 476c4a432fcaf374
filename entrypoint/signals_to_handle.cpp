#include "entrypoint/signals_to_handle.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstring>

namespace mrcnn::entrypoint {
namespace {

std::string_view Trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos)
    return {};
  const auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// 0 when `name` ("SIGQUIT") names no signal of this system.
int SignalNumber(std::string_view name) {
  if (name.substr(0, 3) != "SIG")
    return 0;
  const std::string_view abbrev = name.substr(3);
  for (int s = 1; s < SIGRTMIN; ++s) {
    if (const char* a = sigabbrev_np(s); a != nullptr && abbrev == a)
      return s;
  }
  return 0;
}

}  // namespace

SignalsToHandle ParseSignalsToHandle(std::string_view list) {
  SignalsToHandle result;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos)
      end = list.size();
    const std::string_view name = Trim(list.substr(start, end - start));
    start = end + 1;
    if (name.empty())
      continue;
    const int signal = SignalNumber(name);
    if (signal == 0) {
      result.warnings.push_back(
          fmt::format("TORCHELASTIC_SIGNALS_TO_HANDLE: \"{}\" is not a signal name (such as "
                      "SIGTERM or SIGUSR1); ignored",
                      name));
    } else if (signal == SIGKILL || signal == SIGSTOP) {
      result.warnings.push_back(fmt::format(
          "TORCHELASTIC_SIGNALS_TO_HANDLE: {} cannot be caught by any process; ignored", name));
    } else if (signal == SIGCHLD || signal == SIGPIPE) {
      result.warnings.push_back(
          fmt::format("TORCHELASTIC_SIGNALS_TO_HANDLE: {} is not a stop signal for the "
                      "supervisor (it needs it to reap and write); ignored",
                      name));
    } else if (signal != SIGTERM && signal != SIGINT && signal != SIGHUP &&
               std::find(result.extra.begin(), result.extra.end(), signal) == result.extra.end()) {
      result.extra.push_back(signal);
    }
  }
  return result;
}

int SignalForwardedForStop(int received) {
  if (received == SIGTERM || received == SIGINT || received == SIGHUP)
    return received;
  return SIGTERM;
}

}  // namespace mrcnn::entrypoint
