#include "trainer/data/pil_bilinear_resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::data {
namespace {

// A weight's fixed-point fraction bits: 8 bits of pixel times 22 bits of weight, plus the
// rounding half, stay below 2^31 (the weights of one output pixel sum to about 1 << 22).
constexpr int kWeightBits = 22;
constexpr int32_t kRoundingHalf = int32_t{1} << (kWeightBits - 1);

// One axis's resampling: output index i reads the inputs first[i] .. first[i] + count[i] - 1
// with the weights weights[i * taps + t].
struct AxisWeights {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
};

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// The weights Pillow computes for an axis of in_size pixels resampled to out_size, in the
// same double arithmetic and order, so that the rounded fixed-point weights are the same
// integers: the filter is stretched by the scale when shrinking (each output pixel then
// averages all the inputs it covers), and each pixel's window is clipped to the image.
AxisWeights BilinearAxisWeights(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1 input pixel
  const double inverse_scale = 1.0 / filter_scale;
  AxisWeights axis;
  axis.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  axis.first.resize(static_cast<size_t>(out_size));
  axis.count.resize(static_cast<size_t>(out_size));
  axis.weights.assign(static_cast<size_t>(out_size * axis.taps), 0);
  std::vector<double> w(static_cast<size_t>(axis.taps));
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    // C's truncating casts, as Pillow rounds the window's ends.
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(in_size, static_cast<int64_t>(center + support + 0.5));
    const int64_t n = std::clamp<int64_t>(hi - lo, 0, axis.taps);
    double total = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      w[static_cast<size_t>(t)] =
          Triangle((static_cast<double>(t + lo) - center + 0.5) * inverse_scale);
      total += w[static_cast<size_t>(t)];
    }
    int32_t* fixed = axis.weights.data() + i * axis.taps;
    for (int64_t t = 0; t < n; ++t) {
      const double v = total != 0.0 ? w[static_cast<size_t>(t)] / total : w[static_cast<size_t>(t)];
      const double scaled = v * static_cast<double>(int64_t{1} << kWeightBits);
      fixed[t] = static_cast<int32_t>(v < 0 ? scaled - 0.5 : scaled + 0.5);
    }
    axis.first[static_cast<size_t>(i)] = lo;
    axis.count[static_cast<size_t>(i)] = n;
  }
  return axis;
}

uint8_t Clip8(int32_t accumulated) {
  return static_cast<uint8_t>(std::clamp(accumulated >> kWeightBits, 0, 255));
}

// Rows [begin, end) of the horizontal pass.
template <int kChannels>
void HorizontalRows(const ConstPixels& in, const AxisWeights& axis, const MutablePixels& out,
                    int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const uint8_t* src = in.data + r * in.row_stride;
    uint8_t* dst = out.data + r * out.row_stride;
    for (int64_t x = 0; x < out.width; ++x) {
      const int32_t* w = axis.weights.data() + x * axis.taps;
      const uint8_t* p = src + axis.first[static_cast<size_t>(x)] * kChannels;
      const int64_t n = axis.count[static_cast<size_t>(x)];
      int32_t acc[kChannels];
      for (int c = 0; c < kChannels; ++c)
        acc[c] = kRoundingHalf;
      for (int64_t t = 0; t < n; ++t)
        for (int c = 0; c < kChannels; ++c)
          acc[c] += static_cast<int32_t>(p[t * kChannels + c]) * w[t];
      for (int c = 0; c < kChannels; ++c)
        dst[x * kChannels + c] = Clip8(acc[c]);
    }
  }
}

void HorizontalPass(const ConstPixels& in, const AxisWeights& axis, const MutablePixels& out,
                    const RowRangeRunner& run_rows) {
  run_rows(out.height, [&](int64_t begin, int64_t end) {
    switch (in.channels) {
      case 1:
        return HorizontalRows<1>(in, axis, out, begin, end);
      case 2:
        return HorizontalRows<2>(in, axis, out, begin, end);
      case 3:
        return HorizontalRows<3>(in, axis, out, begin, end);
      default:
        return HorizontalRows<4>(in, axis, out, begin, end);
    }
  });
}

// The vertical pass, whole rows at a time (a row of weighted sums per output row, which the
// compiler vectorises).
void VerticalPass(const ConstPixels& in, const AxisWeights& axis, const MutablePixels& out,
                  const RowRangeRunner& run_rows) {
  const int64_t row_bytes = out.width * out.channels;
  run_rows(out.height, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> acc(static_cast<size_t>(row_bytes));
    // __restrict: the pixels are bytes, which may alias anything, and without it the
    // compiler does not vectorise the sums.
    int32_t* __restrict sums = acc.data();
    for (int64_t y = begin; y < end; ++y) {
      std::fill(acc.begin(), acc.end(), kRoundingHalf);
      const int32_t* w = axis.weights.data() + y * axis.taps;
      const int64_t first = axis.first[static_cast<size_t>(y)];
      for (int64_t t = 0; t < axis.count[static_cast<size_t>(y)]; ++t) {
        const uint8_t* __restrict src = in.data + (first + t) * in.row_stride;
        const int32_t weight = w[t];
        for (int64_t e = 0; e < row_bytes; ++e)
          sums[e] += static_cast<int32_t>(src[e]) * weight;
      }
      uint8_t* __restrict dst = out.data + y * out.row_stride;
      for (int64_t e = 0; e < row_bytes; ++e)
        dst[e] = Clip8(sums[e]);
    }
  });
}

template <typename Pixels>
void CheckPixels(const Pixels& p, const char* which) {
  if (p.data == nullptr || p.height <= 0 || p.width <= 0 || p.channels < 1 || p.channels > 4 ||
      p.row_stride < p.width * p.channels) {
    throw std::invalid_argument(
        std::string("ResizeBilinearLikePil: the ") + which + " image (" + std::to_string(p.height) +
        " x " + std::to_string(p.width) + " x " + std::to_string(p.channels) + ", row stride " +
        std::to_string(p.row_stride) +
        ") must be non-empty, with 1 to 4 channels and a stride of at least a row's bytes");
  }
}

}  // namespace

void ResizeBilinearLikePil(const ConstPixels& source, const MutablePixels& target,
                           const RowRangeRunner& run_rows) {
  CheckPixels(source, "source");
  CheckPixels(target, "target");
  if (source.channels != target.channels) {
    throw std::invalid_argument("ResizeBilinearLikePil: the source has " +
                                std::to_string(source.channels) + " channels, the target " +
                                std::to_string(target.channels));
  }
  const RowRangeRunner run =
      run_rows
          ? run_rows
          : RowRangeRunner([](int64_t count, const std::function<void(int64_t, int64_t)>& body) {
              body(0, count);
            });
  const bool horizontal = target.width != source.width;
  const bool vertical = target.height != source.height;
  if (!horizontal && !vertical) {
    for (int64_t r = 0; r < source.height; ++r)
      std::memcpy(target.data + r * target.row_stride, source.data + r * source.row_stride,
                  static_cast<size_t>(source.width * source.channels));
    return;
  }
  const AxisWeights columns = BilinearAxisWeights(source.width, target.width);
  const AxisWeights rows = BilinearAxisWeights(source.height, target.height);
  if (!vertical)
    return HorizontalPass(source, columns, target, run);
  if (!horizontal)
    return VerticalPass(source, rows, target, run);
  // Both passes: the first one's output is rounded to 8 bits, so the order changes pixels.
  // Pillow 13 runs the vertical pass first when the image loses more than twice as many rows
  // as columns (any shrink in height with a growth in width among them), the horizontal one
  // first otherwise; found by comparing its results with both orders on every size pair of
  // small images, and checked on random sizes by test_pil_resize_oracle.py. (Without a
  // source box the windows of either axis cover all its pixels, so each pass reads the whole
  // image.)
  const bool vertical_first = target.height < source.height &&
                              source.height - target.height > 2 * (source.width - target.width);
  const int64_t between_height = vertical_first ? target.height : source.height;
  const int64_t between_width = vertical_first ? source.width : target.width;
  std::vector<uint8_t> between(
      static_cast<size_t>(between_height * between_width * target.channels));
  const MutablePixels out{between.data(), between_height, between_width, target.channels,
                          between_width * target.channels};
  const ConstPixels in{out.data, out.height, out.width, out.channels, out.row_stride};
  if (vertical_first) {
    VerticalPass(source, rows, out, run);
    HorizontalPass(in, columns, target, run);
  } else {
    HorizontalPass(source, columns, out, run);
    VerticalPass(in, rows, target, run);
  }
}

}  // namespace mrcnn::data
