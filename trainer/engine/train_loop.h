#pragma once
// `trainer train`: the training job. Builds the model from the resolved config, reads the
// train channel's COCO data, trains with SGD + warmup/multistep/cosine, gradient clipping
// and accumulation, AMP on CUDA (fp16 with dynamic loss scaling, or bf16; fp32 on CPU),
// logs through log_format.h (stdout from rank 0 and <output>/metrics.jsonl), checkpoints
// every SOLVER.CHECKPOINT_PERIOD iterations and when a stop is requested (SIGTERM), resumes
// from the newest valid checkpoint, evaluates on the val/test channel every
// TEST.EVAL_PERIOD iterations and at the end, and writes the model dir (rank 0).
// Header is Torch-free.
#include <atomic>
#include <cstdint>
#include <string>

#include "common/env_map.h"
#include "trainer/engine/job_config.h"

namespace mrcnn::engine {

// The process's place in a data-parallel job, from the torchrun variables the entrypoint
// sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); a single process when
// they are absent. Throws common::ConfigError naming the variable when one is malformed.
struct ProcessWorld {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  static ProcessWorld FromEnv(const common::EnvMap& env);
};

// Set by the SIGTERM/SIGINT handler; the loop finishes its step, saves a checkpoint and
// returns 0.
std::atomic<bool>& StopRequested();
void InstallStopHandlers();

// Runs the job; returns the process exit code. Throws with a message naming the file or
// key on bad input.
int RunTrainJob(const TrainJob& job, const ProcessWorld& world);

}  // namespace mrcnn::engine
