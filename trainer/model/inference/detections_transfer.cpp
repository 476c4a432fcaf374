#include "trainer/model/inference/detections_transfer.h"

#include <ATen/Parallel.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <optional>

#include "kernels/mask_paste/mask_paste_args.h"
#include "kernels/ops.h"
#include "trainer/model/detectron2_mask_paste.h"
#include "trainer/model/inference/mask_bits.h"
#include "trainer/model/tiles/mask_region_paste.h"

namespace mrcnn::model {
namespace {

// One untiled image's outputs, as they will be on the host.
struct ImageOutputs {
  at::Tensor boxes;        // N x 4 float
  at::Tensor scores;       // N float
  at::Tensor labels;       // N int64
  at::Tensor keypoints;    // N x K x 3 float (x, y, score), or undefined
  at::Tensor masks;        // N x H x W uint8 0/1 where the model ran, or undefined
  at::Tensor rle_changes;  // int32 change points of every mask, or undefined
  at::Tensor rle_offsets;  // N + 1 int64: mask k's change points are [offsets[k], offsets[k+1])
  // With masks: each mask's paste box (N x 4 int64, inclusive corners, as the paste derived
  // them), outside which the mask is 0; then, on the host, each mask's part inside it.
  at::Tensor paste_corners;
  std::vector<data::MaskRegion> regions;
  at::Tensor crops;  // uint8, the regions' pixels one after another, row-major
  bool crops_packed = false;  // crops holds them eight to a byte (PackMaskBits)
  std::vector<int64_t> crop_offsets;
};

// Mask k's paste box clamped to the image. An empty one (a box on the image's far edge)
// becomes one zero pixel inside the image, so every mask keeps a region and its pixels.
data::MaskRegion PasteRegion(const int64_t* corners, int64_t height, int64_t width) {
  const data::MaskRegion region = ClampedPasteRegion(corners, height, width);
  if (region.width == 0 || region.height == 0)
    return data::MaskRegion{std::min(region.x, width - 1), std::min(region.y, height - 1), 1, 1};
  return region;
}

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
      // The masks' pixels wait for their paste boxes (Finish): only each box crosses.
      for (const ImageOutputs& d : device_outputs) {
        ImageOutputs& h = host_.emplace_back();
        h.boxes = to_host(d.boxes);
        h.scores = to_host(d.scores);
        h.labels = to_host(d.labels);
        h.keypoints = to_host(d.keypoints);
        h.rle_changes = to_host(d.rle_changes);
        h.rle_offsets = to_host(d.rle_offsets);
        h.paste_corners = to_host(d.paste_corners);
      }
    }
    copied_.emplace(device.type());
    copied_->record(copy);
    copy_stream_ = copy;
    // Freed tensors go back to the compute stream's pool at once: kept until the copy is done.
    device_outputs_ = std::move(device_outputs);
  }

  std::vector<ImageDetections> Finish() override {
    if (copied_.has_value()) {
      copied_->synchronize();
    }
    GatherMaskCrops();
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
      if (out.crops.defined()) {
        const auto index = static_cast<size_t>(k);
        const int64_t begin = out.crop_offsets[index], count = out.crop_offsets[index + 1] - begin;
        if (out.crops_packed) {
          d.mask.resize(static_cast<size_t>(count));
          UnpackMaskBits(out.crops.data_ptr<uint8_t>(), begin, count, d.mask.data());
        } else {
          const uint8_t* m = out.crops.data_ptr<uint8_t>() + begin;
          d.mask.assign(m, m + count);
        }
        d.mask_region = out.regions[index];
      } else if (out.rle_changes.defined()) {
        const int64_t* offsets = out.rle_offsets.data_ptr<int64_t>();
        d.mask_rle = data::RleFromChanges(out.rle_changes.data_ptr<int32_t>() + offsets[k],
                                          offsets[k + 1] - offsets[k], image.height, image.width);
      }
      if (out.keypoints.defined()) {
        // COCO's keypoints are pixel indices, the model's continuous coordinates (pixel
        // centres at +0.5): Detectron2's COCO writer subtracts the half pixel too.
        const int64_t num_keypoints = out.keypoints.size(1);
        const float* p = out.keypoints.data_ptr<float>() + k * num_keypoints * 3;
        d.keypoints.resize(static_cast<size_t>(num_keypoints));
        for (int64_t j = 0; j < num_keypoints; ++j, p += 3)
          d.keypoints[static_cast<size_t>(j)] = {p[0] - 0.5f, p[1] - 0.5f, p[2]};
      }
      image.detections.push_back(std::move(d));
    }
  }

  // Each mask's pixels inside its paste box, into one buffer per image: on a CUDA device
  // gathered there on the copy stream, packed eight to a byte and copied to the host (the
  // boxes' pixels cross as bits, not H x W bytes per mask), waited for here; Build unpacks.
  void GatherMaskCrops() {
    std::optional<c10::StreamGuard> on_copy_stream;
    if (copy_stream_.has_value())
      on_copy_stream.emplace(*copy_stream_);
    bool gathered_on_device = false;
    for (size_t j = 0; j < host_.size(); ++j) {
      ImageOutputs& out = host_[j];
      if (!out.paste_corners.defined())
        continue;
      const at::Tensor& source =
          device_outputs_.empty() ? out.masks : device_outputs_[j].masks;  // N x H x W
      const ImageDetections& image = results_[whole_[j]];
      const int64_t n = out.paste_corners.size(0);
      const int64_t* corners = out.paste_corners.data_ptr<int64_t>();
      out.crop_offsets.assign(1, 0);
      for (int64_t k = 0; k < n; ++k) {
        out.regions.push_back(PasteRegion(corners + 4 * k, image.height, image.width));
        out.crop_offsets.push_back(out.crop_offsets.back() +
                                   out.regions.back().width * out.regions.back().height);
      }
      at::Tensor crops = at::empty({out.crop_offsets.back()}, source.options());
      for (int64_t k = 0; k < n; ++k) {
        const data::MaskRegion& r = out.regions[static_cast<size_t>(k)];
        crops.narrow(0, out.crop_offsets[static_cast<size_t>(k)], r.width * r.height)
            .view({r.height, r.width})
            .copy_(source[k].narrow(0, r.y, r.height).narrow(1, r.x, r.width));
      }
      out.crops_packed = crops.is_cuda();
      gathered_on_device |= out.crops_packed;
      out.crops =
          out.crops_packed ? PackMaskBits(crops).to(at::kCPU, /*non_blocking=*/true) : crops;
      out.masks = at::Tensor();
    }
    if (gathered_on_device) {
      c10::Event copied(copy_stream_->device_type());
      copied.record(*copy_stream_);
      copied.synchronize();
    }
  }

  const InferenceModel::State& state_;
  std::vector<ImageDetections> results_;
  std::vector<size_t> whole_;
  std::vector<ImageOutputs> host_;
  std::vector<ImageOutputs> device_outputs_;
  std::optional<c10::Event> copied_;
  std::optional<c10::Stream> copy_stream_;
};

}  // namespace

std::unique_ptr<PendingDetections> StartDetectionsTransfer(const InferenceModel::State& state,
                                                           std::vector<ImageDetections> results,
                                                           std::vector<size_t> whole,
                                                           const std::vector<ImageResult>& outputs,
                                                           bool masks, MaskRleWhere where) {
  const int64_t mask_resolution = state.model->config().MaskResolution();
  std::vector<ImageOutputs> device_outputs;
  device_outputs.reserve(outputs.size());
  for (const ImageResult& r : outputs) {
    ImageOutputs o;
    o.boxes = r.boxes.to(at::kFloat).contiguous();
    o.scores = r.scores.to(at::kFloat).contiguous();
    o.labels = r.labels.to(at::kLong).contiguous();
    if (r.keypoints.defined())
      o.keypoints = r.keypoints.to(at::kFloat).contiguous();
    const bool encode_here =
        where == MaskRleWhere::kAlways ||
        (where == MaskRleWhere::kOnGpu && r.masks.defined() && r.masks.is_cuda());
    if (masks && r.masks.defined() && encode_here) {
      auto [changes, offsets] = kernels::MaskRleChanges(r.masks);
      o.rle_changes = changes.contiguous();
      o.rle_offsets = offsets.contiguous();
    } else if (masks && r.masks.defined()) {
      o.masks = r.masks.contiguous().view({r.masks.size(0), r.masks.size(-2), r.masks.size(-1)});
      // Postprocess pasted with padding 1 from these boxes: the same corners, on the same device.
      o.paste_corners = (state.model->config().detectron2()
                             ? Detectron2PasteCorners(r.boxes)
                             : kernels::PasteBoxes(r.boxes, mask_resolution, 1))
                            .contiguous();
    }
    device_outputs.push_back(std::move(o));
  }
  auto transfer = std::make_unique<DetectionsTransfer>(state, std::move(results), std::move(whole));
  transfer->Copy(std::move(device_outputs));
  return transfer;
}

}  // namespace mrcnn::model
