#pragma once
// 0/1 mask pixels packed eight to a byte for their copy off a GPU, and unpacked on the host.
// Bits are most significant first (numpy.packbits' order): pixel i is bit 7 - i % 8 of byte
// i / 8. Internal to trainer/model.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::model {

// pixels: 1-D uint8 of 0 and 1 on any device. Returns ceil(n / 8) uint8 on the same device,
// the last byte's unused bits 0.
at::Tensor PackMaskBits(const at::Tensor& pixels);

// Writes pixels [begin, begin + count) of what PackMaskBits packed into `out` as 0/1 bytes.
void UnpackMaskBits(const uint8_t* packed, int64_t begin, int64_t count, uint8_t* out);

}  // namespace mrcnn::model
