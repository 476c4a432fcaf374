#include "trainer/engine/hooks/stop_signal.h"

#include <csignal>
#include <string>

namespace mrcnn::engine {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
}

constexpr const char* kVote = "stop_requested";

}  // namespace

std::atomic<bool>& StopRequested() {
  return g_stop;
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

StopSignalHook::StopSignalHook(PeriodicCheckpointerHook& checkpointer, ConsoleLog log,
                               std::function<bool()> local_request)
    : checkpointer_(checkpointer),
      log_(log),
      local_request_(local_request ? std::move(local_request)
                                   : std::function<bool()>([] { return g_stop.load(); })) {}

void StopSignalHook::BeforeTrain(TrainerBase& trainer) {
  trainer.storage().AddRankVote(kVote, local_request_);
}

void StopSignalHook::AfterStep(TrainerBase& trainer) {
  if (trainer.storage().History(kVote).Latest() <= 0)
    return;
  const int64_t done = trainer.done();
  checkpointer_.SaveNow(trainer, done);
  log_.Line("[train] stop requested: saved iteration " + std::to_string(done) + ", exiting");
  trainer.RequestStop();
}

}  // namespace mrcnn::engine
