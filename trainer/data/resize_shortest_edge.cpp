#include "trainer/data/resize_shortest_edge.h"

#include <algorithm>

namespace mrcnn::data {

std::array<int64_t, 2> ResizedSize(int64_t height, int64_t width, int64_t min_size,
                                   int64_t max_size) {
  const double size = static_cast<double>(min_size);
  const double scale = size / static_cast<double>(std::min(height, width));
  double h = height < width ? size : scale * static_cast<double>(height);
  double w = height < width ? scale * static_cast<double>(width) : size;
  if (max_size > 0 && std::max(h, w) > static_cast<double>(max_size)) {
    const double cap = static_cast<double>(max_size) / std::max(h, w);
    h *= cap;
    w *= cap;
  }
  return {std::max<int64_t>(1, static_cast<int64_t>(h + 0.5)),
          std::max<int64_t>(1, static_cast<int64_t>(w + 0.5))};
}

}  // namespace mrcnn::data
