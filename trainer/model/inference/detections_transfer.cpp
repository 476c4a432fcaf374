#include "trainer/model/inference/detections_transfer.h"

#include <ATen/Parallel.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <optional>

#include "kernels/ops.h"

namespace mrcnn::model {
namespace {

// One untiled image's outputs, as they will be on the host.
struct ImageOutputs {
  at::Tensor boxes;        // N x 4 float
  at::Tensor scores;       // N float
  at::Tensor labels;       // N int64
  at::Tensor masks;        // N x H x W uint8 0/1, or undefined
  at::Tensor rle_changes;  // int32 change points of every mask, or undefined
  at::Tensor rle_offsets;  // N + 1 int64: mask k's change points are [offsets[k], offsets[k+1])
};

class DetectionsTransfer final : public PendingDetections {
 public:
  DetectionsTransfer(const InferenceModel::State& state, std::vector<ImageDetections> results,
                     std::vector<size_t> whole)
      : state_(state), results_(std::move(results)), whole_(std::move(whole)) {}

  // Queues the copy of every tensor of `device_outputs` to the host.
  void Copy(std::vector<ImageOutputs> device_outputs) {
    if (device_outputs.empty() || !device_outputs.front().boxes.is_cuda()) {
      host_ = std::move(device_outputs);  // already on the host
      return;
    }
    const c10::Device device = device_outputs.front().boxes.device();
    const c10::impl::VirtualGuardImpl guard(device.type());
    const c10::Stream compute = guard.getStream(device);
    const c10::Stream copy = guard.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
    c10::Event produced(device.type());
    produced.record(compute);
    produced.block(copy);
    {
      const c10::StreamGuard on_copy_stream(copy);
      const auto to_host = [](const at::Tensor& t) {
        return t.defined() ? t.to(t.options().device(at::kCPU), /*non_blocking=*/true)
                           : at::Tensor();
      };
      for (const ImageOutputs& d : device_outputs) {
        host_.push_back(ImageOutputs{to_host(d.boxes), to_host(d.scores), to_host(d.labels),
                                     to_host(d.masks), to_host(d.rle_changes),
                                     to_host(d.rle_offsets)});
      }
    }
    copied_.emplace(device.type());
    copied_->record(copy);
    // Freed tensors go back to the compute stream's pool at once: kept until the copy is done.
    device_outputs_ = std::move(device_outputs);
  }

  std::vector<ImageDetections> Finish() override {
    if (copied_.has_value()) {
      copied_->synchronize();
    }
    device_outputs_.clear();
    at::parallel_for(0, static_cast<int64_t>(whole_.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        Build(host_[static_cast<size_t>(j)], results_[whole_[static_cast<size_t>(j)]]);
      }
    });
    host_.clear();
    return std::move(results_);
  }

 private:
  void Build(const ImageOutputs& out, ImageDetections& image) const {
    const int64_t n = out.boxes.size(0);
    const float* b = out.boxes.data_ptr<float>();
    const float* scores = out.scores.data_ptr<float>();
    const int64_t* labels = out.labels.data_ptr<int64_t>();
    image.detections.reserve(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      Detection d = state_.Describe(labels[k], {b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]},
                                    scores[k]);
      if (out.masks.defined()) {
        const uint8_t* m = out.masks.data_ptr<uint8_t>() + k * image.height * image.width;
        d.mask.assign(m, m + image.height * image.width);
        d.mask_region = data::MaskRegion{0, 0, image.width, image.height};
      } else if (out.rle_changes.defined()) {
        const int64_t* offsets = out.rle_offsets.data_ptr<int64_t>();
        d.mask_rle = data::RleFromChanges(out.rle_changes.data_ptr<int32_t>() + offsets[k],
                                          offsets[k + 1] - offsets[k], image.height, image.width);
      }
      image.detections.push_back(std::move(d));
    }
  }

  const InferenceModel::State& state_;
  std::vector<ImageDetections> results_;
  std::vector<size_t> whole_;
  std::vector<ImageOutputs> host_;
  std::vector<ImageOutputs> device_outputs_;
  std::optional<c10::Event> copied_;
};

}  // namespace

std::unique_ptr<PendingDetections> StartDetectionsTransfer(const InferenceModel::State& state,
                                                           std::vector<ImageDetections> results,
                                                           std::vector<size_t> whole,
                                                           const std::vector<ImageResult>& outputs,
                                                           bool masks, MaskRleWhere where) {
  std::vector<ImageOutputs> device_outputs;
  device_outputs.reserve(outputs.size());
  for (const ImageResult& r : outputs) {
    ImageOutputs o{r.boxes.to(at::kFloat).contiguous(),
                   r.scores.to(at::kFloat).contiguous(),
                   r.labels.to(at::kLong).contiguous(),
                   {},
                   {},
                   {}};
    const bool encode_here =
        where == MaskRleWhere::kAlways ||
        (where == MaskRleWhere::kOnGpu && r.masks.defined() && r.masks.is_cuda());
    if (masks && r.masks.defined() && encode_here) {
      auto [changes, offsets] = kernels::MaskRleChanges(r.masks);
      o.rle_changes = changes.contiguous();
      o.rle_offsets = offsets.contiguous();
    } else if (masks && r.masks.defined()) {
      o.masks = r.masks.contiguous();  // uint8 0/1
    }
    device_outputs.push_back(std::move(o));
  }
  auto transfer = std::make_unique<DetectionsTransfer>(state, std::move(results), std::move(whole));
  transfer->Copy(std::move(device_outputs));
  return transfer;
}

}  // namespace mrcnn::model
