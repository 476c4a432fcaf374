#pragma once
// `trainer train`: the training job. Builds every component from the resolved config
// (builders.h), resumes through the checkpointer, and runs MaskRcnnTrainer's loop with
// its hooks (README.md draws them): SGD (or SOLVER.OPTIMIZER) with warmup + multistep or
// cosine, gradient clipping and accumulation, AMP on CUDA (fp16 with dynamic loss
// scaling, or bf16; fp32 on CPU), data-parallel over the ranks, the CloudWatch console
// line and <output>/metrics.jsonl (rank 0), checkpoints every SOLVER.CHECKPOINT_PERIOD
// iterations and on SIGTERM, COCO evaluation every TEST.EVAL_PERIOD iterations and at the
// end, and the model dir (rank 0). Header is Torch-free.
#include "trainer/engine/config/job_config.h"
#include "trainer/engine/distributed/process_world.h"

namespace mrcnn::engine {

// Runs the job (or only its evaluation, for eval-only); returns the process exit code.
// Throws with a message naming the file or key on bad input.
int RunTrainJob(const TrainJob& job, const ProcessWorld& world);

}  // namespace mrcnn::engine
