#include "trainer/engine/trainer_base.h"

#include <stdexcept>

namespace mrcnn::engine {

void TrainerBase::RegisterHooks(std::vector<std::unique_ptr<HookBase>> hooks) {
  for (auto& h : hooks) {
    if (!h)
      throw std::invalid_argument("TrainerBase::RegisterHooks: null hook");
    hooks_.push_back(std::move(h));
  }
}

void TrainerBase::Train(int64_t start_iter, int64_t max_iter) {
  start_iter_ = start_iter;
  max_iter_ = max_iter;
  iter_ = start_iter;
  stopping_ = false;
  for (auto& h : hooks_)
    h->BeforeTrain(*this);
  for (; iter_ < max_iter_ && !stopping_; ++iter_) {
    storage_.set_iteration(iter_);
    for (auto& h : hooks_)
      h->BeforeStep(*this);
    RunStep();
    storage_.SyncRanks();
    for (auto& h : hooks_)
      h->AfterStep(*this);
  }
  FlushDeferred();
  for (auto& h : hooks_)
    h->AfterTrain(*this);
}

}  // namespace mrcnn::engine
