#include "trainer/engine/mask_rcnn_trainer.h"

#include <ATen/Context.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/data/data_loader.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::engine {
namespace {

// The generator of one training image's anchor and RoI sampling: seeded from the run's
// seed, the iteration, the micro-batch and the image id only, so an image samples the same
// anchors whichever rank and batch slot it lands in (1 process with batch B and W
// processes with B/W then compute the same gradients).
at::Generator ImageSamplingGenerator(const c10::Device& device, uint64_t seed, int64_t iteration,
                                     int64_t micro, int64_t image_id) {
  auto mix = [](uint64_t x) {  // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(seed);
  for (const int64_t v : {iteration, micro, image_id})
    h = mix(h ^ static_cast<uint64_t>(v));
  at::Generator base = at::globalContext().defaultGenerator(device);
  at::Generator g;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    g = base.clone();
  }
  g.set_current_seed(h >> 1);
  return g;
}

}  // namespace

// Through the device-generic allocator interface rather than c10/cuda headers: the
// trainer runs on CUDA through LibTorch even in builds without our CUDA kernels.
double PeakMemoryMb(const c10::Device& device) {
  if (device.is_cuda()) {
    const auto stats = c10::getDeviceAllocator(c10::kCUDA)->getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1024.0 * 1024.0);
  }
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

MaskRcnnTrainer::MaskRcnnTrainer(EventStorage storage, TrainStep& step, data::DataLoader& loader,
                                 TrainingState& state, const c10::Device& device,
                                 int64_t accumulation, int64_t read_period)
    : TrainerBase(std::move(storage)),
      step_(step),
      loader_(loader),
      state_(state),
      device_(device),
      accumulation_(accumulation),
      read_period_(read_period) {
  state_.net.train();
}

void MaskRcnnTrainer::RunStep() {
  using Clock = std::chrono::steady_clock;
  double data_time = 0;
  PendingLosses pending{iter(), {}, {}};
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    const auto d0 = Clock::now();
    std::optional<data::Batch> batch = loader_.Next();
    ++state_.batches_consumed;
    data_time += std::chrono::duration<double>(Clock::now() - d0).count();
    model::ImageBatch ib = ToImageBatch(*batch, device_);
    std::vector<model::ImageTarget> targets = ToTargets(*batch, device_);
    std::vector<at::Generator> generators;
    for (const int64_t id : batch->image_ids) {
      generators.push_back(
          ImageSamplingGenerator(device_, static_cast<uint64_t>(state_.seed), iter(), micro, id));
    }
    pending.micro.push_back(
        step_.ForwardBackward(ib, targets, std::move(generators), accumulation_, iter() + 1));
  }
  step_.Finish();
  // fp16: the dynamic loss scale after this step's update (it halves on overflow), read
  // with the losses. A copy: the scaler updates its tensor in place.
  if (state_.scaler.enabled())
    pending.loss_scale = state_.scaler.scale_tensor().clone();
  pending_.push_back(std::move(pending));
  EventStorage& s = storage();
  s.PutScalar("data_time", data_time);
  s.PutScalar("max_mem_mb", PeakMemoryMb(device_));
  if (read_period_ > 0 && (done() % read_period_ == 0 || is_last_iteration()))
    FlushDeferred();
}

void MaskRcnnTrainer::FlushDeferred() {
  if (pending_.empty())
    return;
  // Every micro-batch's values end to end: one copy to the host for the whole window.
  std::vector<at::Tensor> all;
  for (const PendingLosses& p : pending_) {
    for (const MicroBatchLosses& m : p.micro)
      all.push_back(m.values);
    if (p.loss_scale.defined())
      all.push_back(p.loss_scale.to(all.front().device()));
  }
  const at::Tensor host = torch::cat(all).to(torch::kCPU).contiguous();
  const float* r = host.data_ptr<float>();
  const double parts = static_cast<double>(accumulation_);
  std::vector<PendingLosses> window = std::move(pending_);
  pending_.clear();
  EventStorage& s = storage();
  for (const PendingLosses& p : window) {
    // The same sums in the same order as when each micro-batch was read on its own.
    std::map<std::string, double> losses;
    double total = 0;
    for (const MicroBatchLosses& m : p.micro) {
      step_.CheckFinite(r[m.names.size()], p.iteration + 1);
      for (size_t k = 0; k < m.names.size(); ++k)
        losses[m.names[k]] += static_cast<double>(r[k]) / parts;
      total += static_cast<double>(r[m.names.size()]) / parts;
      r += m.names.size() + 1;
    }
    for (const auto& [k, value] : losses)
      s.PutScalarAt(k, p.iteration, value, RankReduce::kMean);
    s.PutScalarAt("total_loss", p.iteration, total, RankReduce::kMean);
    if (p.loss_scale.defined()) {
      const double scale = *r++;
      s.PutScalarAt("amp/loss_scale", p.iteration, scale);
      step_.CheckLossScale(scale, p.iteration + 1);
    }
  }
  s.SyncMeans();
}

}  // namespace mrcnn::engine
