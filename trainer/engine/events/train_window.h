#pragma once
// The log record of a window of iterations, read from the event store: the mean of each
// loss, of iteration and data time over the window (and their ratio, the share of the
// time spent waiting for data), the newest lr, ETA and peak memory.
// The console line and metrics.jsonl are both made from it, so they always agree.
// Torch-free.
#include <cstdint>

#include "trainer/engine/events/event_storage.h"
#include "trainer/engine/events/log_format.h"

namespace mrcnn::engine {

struct TrainWindowSpec {
  int64_t max_iter = 0;
  int64_t images_per_iteration = 0;  // over all processes (SOLVER.IMS_PER_BATCH)
};

// The window is the iterations > `after` up to storage.iteration(). Scalars read: every
// "loss_*", "total_loss", "time", "data_time" (window means), "lr", "eta_seconds",
// "max_mem_mb" (newest); a missing one reads as 0. "amp/loss_scale" (newest) when put.
TrainLogEntry TrainWindowEntry(const EventStorage& storage, int64_t after,
                               const TrainWindowSpec& spec);

}  // namespace mrcnn::engine
