#include "trainer/model/inference/mask_bits.h"

#include <ATen/ATen.h>

namespace mrcnn::model {

at::Tensor PackMaskBits(const at::Tensor& pixels) {
  TORCH_CHECK(pixels.dim() == 1 && pixels.scalar_type() == at::kByte,
              "PackMaskBits: pixels must be 1-D uint8, got ", pixels.sizes(), " ",
              pixels.scalar_type());
  const int64_t n = pixels.size(0);
  const at::Tensor padded = at::constant_pad_nd(pixels, {0, (8 - n % 8) % 8}, 0);
  // Made where the pixels are: a host tensor copied up would wait on the copy stream.
  const at::Tensor shifts = at::arange(7, -1, -1, pixels.options().dtype(at::kInt));
  // Each byte's eight pixels shifted to their bits and summed: at most 255.
  return at::bitwise_left_shift(padded.view({-1, 8}).to(at::kInt), shifts).sum(1).to(at::kByte);
}

void UnpackMaskBits(const uint8_t* packed, int64_t begin, int64_t count, uint8_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t bit = begin + i;
    out[i] = static_cast<uint8_t>((packed[bit >> 3] >> (7 - (bit & 7))) & 1);
  }
}

}  // namespace mrcnn::model
