// Helper for test/oracle/data/test_pil_resize_oracle.py: reads cases from stdin, each a
// header of five little-endian int32 (height, width, channels, out_height, out_width), the
// pixels (row-major, interleaved) and then an int32 crop flag; writes each case's resized
// pixels to stdout. A crop flag of 1 resizes the image through a view with a row stride
// wider than its rows (the image sits inside a buffer two pixels wider), as a tile of a larger
// image is passed; a crop flag of 2 also runs each pass as row ranges of 7 rows, last first
// (the order threads may take them in).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "trainer/data/pil_bilinear_resize.h"

namespace {

bool ReadInts(int32_t* out, size_t n) {
  return std::fread(out, sizeof(int32_t), n, stdin) == n;
}

}  // namespace

int main() {
  try {
    int32_t header[5];
    while (ReadInts(header, 5)) {
      const int64_t h = header[0], w = header[1], c = header[2], oh = header[3], ow = header[4];
      std::vector<uint8_t> pixels(static_cast<size_t>(h * w * c));
      int32_t crop = 0;
      if (std::fread(pixels.data(), 1, pixels.size(), stdin) != pixels.size() ||
          !ReadInts(&crop, 1)) {
        std::fprintf(stderr, "pil_resize_tool: truncated case\n");
        return 1;
      }
      const int64_t stride = (w + (crop != 0 ? 2 : 0)) * c;
      std::vector<uint8_t> padded(static_cast<size_t>(h * stride), 77);
      for (int64_t r = 0; r < h; ++r)
        std::memcpy(padded.data() + r * stride, pixels.data() + r * w * c,
                    static_cast<size_t>(w * c));
      std::vector<uint8_t> out(static_cast<size_t>(oh * ow * c));
      const mrcnn::data::RowRangeRunner backwards_in_sevens =
          [](int64_t count, const std::function<void(int64_t, int64_t)>& body) {
            for (int64_t end = count; end > 0; end -= 7)
              body(std::max<int64_t>(0, end - 7), end);
          };
      mrcnn::data::ResizeBilinearLikePil({padded.data(), h, w, c, stride},
                                         {out.data(), oh, ow, c, ow * c},
                                         crop == 2 ? backwards_in_sevens : nullptr);
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pil_resize_tool: %s\n", e.what());
    return 1;
  }
}
