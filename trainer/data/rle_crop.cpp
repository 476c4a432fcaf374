#include "trainer/data/rle_crop.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mrcnn::data {

namespace {

// Appends a run of `length` pixels of `value` to counts that start with a zeros run.
void AppendRun(std::vector<uint32_t>& counts, bool value, uint64_t length) {
  if (length == 0)
    return;
  if (counts.empty()) {
    if (value)
      counts.push_back(0);
    counts.push_back(static_cast<uint32_t>(length));
    return;
  }
  const bool last_value = (counts.size() - 1) % 2 == 1;
  if (last_value == value) {
    counts.back() += static_cast<uint32_t>(length);
  } else {
    counts.push_back(static_cast<uint32_t>(length));
  }
}

}  // namespace

Rle CropRle(const Rle& rle, const MaskRegion& region) {
  if (region.width <= 0 || region.height <= 0 || region.x < 0 || region.y < 0 ||
      region.x + region.width > rle.width || region.y + region.height > rle.height) {
    throw std::invalid_argument("CropRle: region " + std::to_string(region.width) + "x" +
                                std::to_string(region.height) + " at (" + std::to_string(region.x) +
                                ", " + std::to_string(region.y) + ") does not lie within the " +
                                std::to_string(rle.width) + "x" + std::to_string(rle.height) +
                                " mask");
  }
  const uint64_t H = static_cast<uint64_t>(rle.height);
  const uint64_t first_x = static_cast<uint64_t>(region.x);
  const uint64_t last_x = first_x + static_cast<uint64_t>(region.width) - 1;
  const uint64_t top = static_cast<uint64_t>(region.y);
  const uint64_t rows = static_cast<uint64_t>(region.height);
  Rle out{region.height, region.width, {}};
  uint64_t start = 0;
  // Runs go down the columns (column-major); each run gives the part of every region
  // column it passes through, in order, so the output runs are column-major too.
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const uint64_t end = start + rle.counts[i];
    if (end > start) {
      const bool value = i % 2 == 1;
      const uint64_t x_begin = std::max(start / H, first_x);
      const uint64_t x_end = std::min((end - 1) / H, last_x);
      for (uint64_t x = x_begin; x <= x_end; ++x) {
        const uint64_t column_top = x * H + top;
        const uint64_t from = std::max(start, column_top);
        const uint64_t to = std::min(end, column_top + rows);
        if (to > from)
          AppendRun(out.counts, value, to - from);
      }
    }
    start = end;
    if (start / H > last_x)
      break;
  }
  if (start < (last_x + 1) * H) {
    throw std::invalid_argument("CropRle: the counts cover " + std::to_string(start) +
                                " pixels, fewer than the " + std::to_string(rle.height) + "x" +
                                std::to_string(rle.width) + " mask's");
  }
  return out;
}

}  // namespace mrcnn::data
