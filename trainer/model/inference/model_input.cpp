#include "trainer/model/inference/model_input.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "trainer/data/pil_bilinear_resize.h"
#include "trainer/data/resize_shortest_edge.h"

namespace mrcnn::model {
namespace {

// Rows per task of the resize's passes on torch's intra-op threads: enough work per task
// (a few thousand pixels) that splitting pays.
constexpr int64_t kResizeRowsPerTask = 16;

// hwc resized with Pillow's bilinear to height x width (H x W x 3 uint8, contiguous).
at::Tensor ResizeLikePil(const at::Tensor& hwc, int64_t height, int64_t width) {
  const at::Tensor source = hwc.stride(1) == 3 && hwc.stride(2) == 1 ? hwc : hwc.contiguous();
  at::Tensor out = at::empty({height, width, 3}, source.options());
  const data::RowRangeRunner on_intra_op_threads =
      [](int64_t count, const std::function<void(int64_t, int64_t)>& body) {
        at::parallel_for(0, count, kResizeRowsPerTask, body);
      };
  data::ResizeBilinearLikePil(
      {source.data_ptr<uint8_t>(), source.size(0), source.size(1), 3, source.stride(0)},
      {out.data_ptr<uint8_t>(), height, width, 3, width * 3}, on_intra_op_threads);
  return out;
}

}  // namespace

at::Tensor ModelInput(const at::Tensor& hwc, const c10::Device& device) {
  if (device.is_cuda()) {
    // Through pinned memory (torch's host allocator reuses it): the upload is queued, not
    // waited for, where a pageable source would make the host wait.
    at::Tensor pinned = at::empty(hwc.sizes(), hwc.options().pinned_memory(true)).copy_(hwc);
    return pinned.to(device, /*non_blocking=*/true)
        .permute({2, 0, 1})
        .to(torch::kFloat)
        .div_(255.0);
  }
  return hwc.to(device).permute({2, 0, 1}).to(torch::kFloat).div_(255.0);
}

void AddModelInput(const ModelConfig& config, const at::Tensor& hwc, const c10::Device& device,
                   ModelInputs& inputs) {
  const int64_t height = hwc.size(0), width = hwc.size(1);
  inputs.output_sizes.push_back({height, width});
  if (!config.detectron2()) {
    inputs.images.push_back(ModelInput(hwc, device));
    return;
  }
  const auto [h, w] = data::ResizedSize(height, width, config.min_size_test, config.max_size_test);
  inputs.images.push_back(
      ModelInput(h == height && w == width ? hwc : ResizeLikePil(hwc, h, w), device));
}

}  // namespace mrcnn::model
