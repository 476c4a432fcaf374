#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing,
// and TFRecord's masked form of it. Debian 12 packages no crc32c library, so this is a
// table-driven implementation checked against the RFC 3720 test vectors. Torch-free.
#include <cstddef>
#include <cstdint>

namespace mrcnn::engine {

uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8, as TensorFlow's record writer stores it.
uint32_t MaskedCrc32c(const void* data, size_t size);

}  // namespace mrcnn::engine
