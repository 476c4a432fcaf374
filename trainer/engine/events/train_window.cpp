#include "trainer/engine/events/train_window.h"

#include <optional>

namespace mrcnn::engine {
namespace {

double WindowMean(const EventStorage& storage, const std::string& name, int64_t after) {
  if (!storage.Has(name))
    return 0;
  return storage.History(name).MeanAfter(after).value_or(0.0);
}

std::optional<double> NewestIfPut(const EventStorage& storage, const std::string& name) {
  if (!storage.Has(name) || storage.History(name).empty())
    return std::nullopt;
  return storage.History(name).Latest();
}

double Newest(const EventStorage& storage, const std::string& name) {
  return NewestIfPut(storage, name).value_or(0.0);
}

}  // namespace

TrainLogEntry TrainWindowEntry(const EventStorage& storage, int64_t after,
                               const TrainWindowSpec& spec) {
  TrainLogEntry e;
  e.iteration = storage.iteration() + 1;
  e.max_iter = spec.max_iter;
  for (const auto& [name, history] : storage.scalars()) {
    if (name.rfind("loss_", 0) == 0) {
      if (auto mean = history.MeanAfter(after))
        e.losses[name] = *mean;
    }
  }
  e.total_loss = WindowMean(storage, "total_loss", after);
  e.lr = Newest(storage, "lr");
  e.iter_time = WindowMean(storage, "time", after);
  e.data_time = WindowMean(storage, "data_time", after);
  e.data_wait_share = e.iter_time > 0 ? e.data_time / e.iter_time : 0.0;
  e.images_per_sec =
      e.iter_time > 0 ? static_cast<double>(spec.images_per_iteration) / e.iter_time : 0.0;
  e.eta_seconds = Newest(storage, "eta_seconds");
  e.max_mem_mb = Newest(storage, "max_mem_mb");
  e.loss_scale = NewestIfPut(storage, "amp/loss_scale");
  return e;
}

}  // namespace mrcnn::engine
