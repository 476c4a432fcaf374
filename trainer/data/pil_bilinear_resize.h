#pragma once
// Resizing of 8-bit images that gives the pixels of Pillow's
// `Image.resize((width, height), Image.BILINEAR)`: Detectron2's ResizeTransform resizes uint8
// images that way, in training (ResizeShortestEdge) and in DefaultPredictor.
//
// The algorithm is Pillow's separable convolution resampling: per output pixel a triangle
// filter centred on the pixel's centre mapped into the input, whose support grows with the
// scale factor when shrinking (so downscaling averages every input pixel it covers: it
// antialiases, unlike OpenCV's or Torch's bilinear), normalised weights turned into 22-bit
// fixed point, a horizontal pass rounded to 8 bits, then a vertical pass over that result.
// Equal arithmetic gives equal bytes (test/oracle/data/test_pil_resize_oracle.py compares with
// Pillow). Torch-free and OpenCV-free: plain buffers with row strides, so callers may pass a
// crop or a tile of a larger image without a copy.
#include <cstdint>
#include <functional>

namespace mrcnn::data {

// Interleaved 8-bit pixels: `channels` bytes per pixel, rows `row_stride` bytes apart
// (>= width * channels).
struct ConstPixels {
  const uint8_t* data = nullptr;
  int64_t height = 0, width = 0, channels = 0, row_stride = 0;
};
struct MutablePixels {
  uint8_t* data = nullptr;
  int64_t height = 0, width = 0, channels = 0, row_stride = 0;
};

// Runs body(begin, end) over a split of [0, count); the calls may run concurrently. The
// default runs body(0, count) on the caller's thread.
using RowRangeRunner =
    std::function<void(int64_t count, const std::function<void(int64_t, int64_t)>& body)>;

// Writes `source` resized to target's height and width into `target` (the same channel count,
// 1 to 4). Rows of the target are independent, so `run_rows` may spread each pass over
// threads without changing a byte. Throws std::invalid_argument for empty images, a channel
// count outside 1..4 or mismatched channels, or a stride below a row's bytes. Equal sizes
// copy the pixels (Pillow's resize does too).
void ResizeBilinearLikePil(const ConstPixels& source, const MutablePixels& target,
                           const RowRangeRunner& run_rows = {});

}  // namespace mrcnn::data
