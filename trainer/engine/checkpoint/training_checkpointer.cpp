#include "trainer/engine/checkpoint/training_checkpointer.h"

#include <torch/torch.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config_error.h"
#include "trainer/engine/checkpoint/rng_state.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/optimizer.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/safetensors.h"

namespace mrcnn::engine {

TrainingCheckpointer::TrainingCheckpointer(CheckpointDir dir, TrainingState& state,
                                           dist::DataParallel& dp, ConsoleLog log)
    : dir_(std::move(dir)), state_(state), dp_(dp), log_(log) {}

void TrainingCheckpointer::Restore(const LoadedCheckpoint& loaded, bool eval_only) {
  model::TensorMap model_state;
  std::map<std::string, at::Tensor> optimizer_state, scaler_state, rng_state;
  for (const auto& [name, value] : loaded.tensors) {
    if (name.rfind("model/", 0) == 0)
      model_state[name.substr(6)] = value;
    else if (name.rfind("optimizer/", 0) == 0)
      optimizer_state[name] = value;
    else if (name.rfind("scaler/", 0) == 0)
      scaler_state[name] = value;
    else if (name.rfind("rng/", 0) == 0)
      rng_state[name] = value;
  }
  model::LoadStateDict(state_.net, model_state, loaded.path.string());
  if (eval_only)
    return;
  state_.optimizer.LoadState(optimizer_state);
  state_.scaler.LoadState(scaler_state);
  RestoreRngState(rng_state);
  if (auto it = loaded.tensors.find("train/batches_consumed"); it != loaded.tensors.end())
    state_.batches_consumed = it->second.item<int64_t>();
  if (auto it = loaded.tensors.find("train/seed"); it != loaded.tensors.end())
    state_.seed = it->second.item<int64_t>();
}

// All ranks start from rank 0's state: weights and buffers (identical anyway when the
// seed and MODEL.WEIGHTS are, but not when e.g. a checkpoint is visible to rank 0 only),
// the optimizer's state and the resume position.
void TrainingCheckpointer::AgreeWithRoot(int64_t& start_iter) {
  if (!dp_.active())
    return;
  std::vector<int64_t> position = {start_iter, state_.batches_consumed, state_.seed,
                                   static_cast<int64_t>(state_.optimizer.State().size())};
  const std::vector<int64_t> mine = position;
  dp_.BroadcastFromRoot(position);
  if (position != mine) {
    throw std::runtime_error("rank " + std::to_string(dp_.rank()) + " would resume at iteration " +
                             std::to_string(mine[0]) + " with " + std::to_string(mine[3]) +
                             " optimizer state tensors, rank 0 at iteration " +
                             std::to_string(position[0]) + " with " + std::to_string(position[3]) +
                             ": every rank must see the same checkpoint directory (" +
                             dir_.dir().string() + "); pass resume false to start fresh");
  }
  std::vector<at::Tensor> tensors;
  for (const auto& [name, value] : model::StateDict(state_.net))
    tensors.push_back(value);
  for (const auto& [name, value] : state_.optimizer.State())
    tensors.push_back(value);
  dp_.BroadcastFromRoot(tensors);
}

int64_t TrainingCheckpointer::ResumeOrLoad(std::optional<bool> resume, bool eval_only) {
  if (dp_.rank() == 0) {
    for (const auto& removed : dir_.RemoveStaleTemporaries())
      log_.Line("[checkpoint] removed a partial write left by a stopped writer: " +
                removed.string());
  }
  int64_t start_iter = 0;
  if (resume.value_or(true)) {
    auto loaded = dir_.LoadNewestValid(
        [&](const std::string& w) { log_.Line("[checkpoint] warning: " + w); });
    // Detectron2's resume_or_load(resume=True): the newest checkpoint when there is one,
    // else the initial weights (MODEL.WEIGHTS / the weights channel, already in the model).
    // detectron2-sagemaker's own README example passes "resume": "True" on a first run.
    if (!loaded && resume.value_or(false) && !eval_only) {
      log_.Line("[checkpoint] resume is true and " + dir_.dir().string() +
                " holds no valid checkpoint: starting from the initial weights");
    }
    if (loaded) {
      Restore(*loaded, eval_only);
      if (!eval_only)
        start_iter = loaded->iteration;
      log_.Line("[checkpoint] resumed from " + loaded->path.string() + " at iteration " +
                std::to_string(loaded->iteration));
    }
  }
  AgreeWithRoot(start_iter);
  return start_iter;
}

void TrainingCheckpointer::Save(int64_t completed_iterations) {
  if (dp_.rank() != 0)
    return;
  NamedTensors t;
  for (const auto& [name, value] : model::StateDict(state_.net))
    t["model/" + name] = value;
  for (const auto& [name, value] : state_.optimizer.State())
    t[name] = value;
  for (const auto& [name, value] : state_.scaler.State())
    t[name] = value;
  for (const auto& [name, value] : CaptureRngState())
    t[name] = value;
  t["train/batches_consumed"] = torch::tensor(state_.batches_consumed, torch::kInt64);
  t["train/seed"] = torch::tensor(state_.seed, torch::kInt64);
  const auto file = dir_.Save(completed_iterations, t);
  log_.Line("[checkpoint] saved " + file.string());
}

}  // namespace mrcnn::engine
