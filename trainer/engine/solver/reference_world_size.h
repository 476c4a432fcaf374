#pragma once
// SOLVER.REFERENCE_WORLD_SIZE as Detectron2's DefaultTrainer.auto_scale_workers applies it: a
// config written for N processes, run by W, gets IMS_PER_BATCH and BASE_LR scaled by W/N and
// MAX_ITER, WARMUP_ITERS, STEPS, TEST.EVAL_PERIOD and SOLVER.CHECKPOINT_PERIOD by N/W (Python's
// round: half to even), so that the job sees the same images per process and the same number
// of epochs. Torch-free.
#include <cstdint>
#include <string>

namespace mrcnn::engine {

class TrainConfig;

// Scales `config` in place for `world_size` processes and returns a line saying what changed,
// or "" when REFERENCE_WORLD_SIZE is 0 or already `world_size` (nothing changes). Throws
// common::ConfigError naming SOLVER.REFERENCE_WORLD_SIZE when it is negative or does not
// divide SOLVER.IMS_PER_BATCH.
std::string ScaleToReferenceWorldSize(TrainConfig& config, int64_t world_size);

}  // namespace mrcnn::engine
