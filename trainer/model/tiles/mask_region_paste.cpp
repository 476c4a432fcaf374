#include "trainer/model/tiles/mask_region_paste.h"

#include <algorithm>

#include "kernels/mask_paste/mask_paste_args.h"
#include "kernels/ops.h"
#include "trainer/model/detectron2_mask_paste.h"

namespace mrcnn::model {

data::MaskRegion ClampedPasteRegion(const int64_t* corners, int64_t image_height,
                                    int64_t image_width) {
  const int64_t x0 = std::clamp<int64_t>(corners[0], 0, image_width);
  const int64_t y0 = std::clamp<int64_t>(corners[1], 0, image_height);
  const int64_t x1 = std::clamp<int64_t>(corners[2] + 1, x0, image_width);
  const int64_t y1 = std::clamp<int64_t>(corners[3] + 1, y0, image_height);
  return data::MaskRegion{x0, y0, x1 - x0, y1 - y0};
}

RegionMask PasteMaskRegion(const at::Tensor& probabilities, const std::array<float, 4>& box,
                           int64_t image_height, int64_t image_width, double threshold) {
  TORCH_CHECK(probabilities.dim() == 2 && probabilities.size(0) == probabilities.size(1),
              "PasteMaskRegion: probabilities must be R x R, got ", probabilities.sizes());
  const int64_t r = probabilities.size(0);
  const at::Tensor box_tensor =
      at::tensor(std::vector<float>(box.begin(), box.end()), at::TensorOptions().dtype(at::kFloat))
          .view({1, 4});
  // The integer paste box (inclusive corners) the kernel derives for padding 1: the mask
  // is bilinearly resized into it, so nothing outside it is ever 1.
  const at::Tensor corners = kernels::PasteBoxes(box_tensor, r, 1);
  const int64_t* c = corners.data_ptr<int64_t>();
  RegionMask out;
  out.region = ClampedPasteRegion(c, image_height, image_width);
  const int64_t x0 = out.region.x, y0 = out.region.y;
  if (out.region.width == 0 || out.region.height == 0)
    return out;
  // Pad the mask by one zero pixel here and paste with padding 0 into the region, with the
  // paste box moved by the region's corner: with padding 0 the kernel expands a box by
  // exactly 1 and its integer corners stay as they are, so every pixel samples the padded
  // mask at the same place as in the whole-image paste.
  const at::Tensor padded =
      at::constant_pad_nd(probabilities, {1, 1, 1, 1}, 0).view({1, 1, r + 2, r + 2});
  const at::Tensor shifted =
      at::tensor(std::vector<float>{static_cast<float>(c[0] - x0), static_cast<float>(c[1] - y0),
                                    static_cast<float>(c[2] - x0), static_cast<float>(c[3] - y0)},
                 at::TensorOptions().dtype(at::kFloat).device(probabilities.device()))
          .view({1, 4});
  const at::Tensor bits =
      kernels::PasteMasksBinary(padded, shifted, out.region.height, out.region.width, 0, threshold)
          .to(at::kCPU)
          .contiguous();
  const uint8_t* p = bits.data_ptr<uint8_t>();
  out.bits.assign(p, p + out.region.width * out.region.height);
  return out;
}

RegionMask PasteMaskRegionDetectron2(const at::Tensor& probabilities, const std::array<float, 4>& box,
                                     int64_t image_height, int64_t image_width, double threshold) {
  const PasteRegion r = Detectron2PasteRegion(box.data(), image_height, image_width);
  RegionMask out;
  out.region = data::MaskRegion{r.x0, r.y0, std::max<int64_t>(r.x1 - r.x0, 0), std::max<int64_t>(r.y1 - r.y0, 0)};
  if (out.region.width == 0 || out.region.height == 0)
    return out;
  const at::Tensor box_tensor =
      at::tensor(std::vector<float>(box.begin(), box.end()), at::TensorOptions().dtype(at::kFloat));
  const at::Tensor bits = SampleMaskOnRegion(probabilities.to(at::kCPU), box_tensor, r)
                              .ge(threshold)
                              .to(at::kByte)
                              .contiguous();
  const uint8_t* p = bits.data_ptr<uint8_t>();
  out.bits.assign(p, p + out.region.width * out.region.height);
  return out;
}

}  // namespace mrcnn::model
