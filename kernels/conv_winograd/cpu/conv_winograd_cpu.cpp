// CPU 3×3 convolution (stride 1, padding 1, no dilation, no groups) by Winograd's minimal
// filtering F(m×m, 3×3): tiles of the input are transformed, multiplied with the
// pre-transformed filters as alpha² independent K×C by C×tiles GEMMs (MKL through
// at::bmm), and transformed back with bias and ReLU fused. oneDNN has no Winograd
// convolution for AVX2 machines and runs these layers as direct convolutions at close to
// the FMA peak, so doing fewer multiplications is the only way to make them faster; on
// CUDA cuDNN chooses Winograd itself, which is why there is no CUDA twin.
//
// Tiles are processed in chunks of whole tile rows so that the transformed input and the
// GEMM output of a chunk stay in the last-level cache, and chunks run in parallel (each
// chunk's GEMMs then run on one thread, without barriers between the three phases).
//
// Many small images (the mask head's 100 RoIs of 14×14) are laid out as a grid on one
// canvas with a zero row or column between neighbours: the zeros are exactly the padding
// each image's convolution sees, and the canvas wastes far fewer tiles on the images'
// ragged edges: alone, a 14×14 RoI needs 3×3 tiles of 6×6 (18×18 outputs computed for
// 14×14); on a canvas it takes 15×15 positions, 6.25 tiles.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/conv_winograd/winograd_tiles.h"

namespace mrcnn::kernels {
namespace {

// Target size of a chunk: alpha² × tiles is at most 36 × 384 transformed values per channel,
// 14 MB at 256 channels, so the GEMMs' input and output together fit a 32 MB L3.
constexpr int64_t kTransformedPerChunk = 36 * 384;

// Canvases wider than this stop gaining (tiles are already nearly full) and only make
// chunks coarser.
constexpr int64_t kMaxCanvasWidth = 256;

template <int M>
struct FloatTile {
  static constexpr int kAlpha = WinogradTile<M>::kAlpha;
  std::array<std::array<float, kAlpha>, kAlpha> bt{};
  std::array<std::array<float, kAlpha>, M> at{};
  constexpr FloatTile() {
    for (int r = 0; r < kAlpha; ++r)
      for (int s = 0; s < kAlpha; ++s)
        bt[r][s] = static_cast<float>(WinogradTile<M>::kBt[r][s]);
    for (int r = 0; r < M; ++r)
      for (int s = 0; s < kAlpha; ++s)
        at[r][s] = static_cast<float>(WinogradTile<M>::kAt[r][s]);
  }
};

template <int M>
inline constexpr FloatTile<M> kTile{};

// acc + c·x with c known at compile time: zero terms vanish, ±1 become add/subtract.
template <float C>
[[gnu::always_inline]] inline float AddTerm(float acc, float x) {
  if constexpr (C == 0.f)
    return acc;
  else if constexpr (C == 1.f)
    return acc + x;
  else if constexpr (C == -1.f)
    return acc - x;
  else
    return acc + C * x;
}

// Which matrix a pass multiplies by: Bᵀ for the input transform, Aᵀ for the output one.
enum class Pass { kInput, kOutput };

template <int M, Pass P, int Row, int S>
inline constexpr float kCoef = P == Pass::kInput ? kTile<M>.bt[Row][S] : kTile<M>.at[Row][S];

// out[p] = Σ_s Mat[row][s] · in[s][p] over a contiguous run of tiles. Starting from -0.0f
// lets the compiler drop the initial add (x + -0.0f == x exactly).
template <int M, Pass P, int Row, int... S>
[[gnu::always_inline]] inline void Combine(std::integer_sequence<int, S...>, const float* const* in,
                                           float* out, int64_t length) {
  for (int64_t p = 0; p < length; ++p) {
    float acc = -0.0f;
    ((acc = AddTerm<kCoef<M, P, Row, S>>(acc, in[S][p])), ...);
    out[p] = acc;
  }
}

// Every row of the pass's matrix: out[row] for row in Row...; inputs in[0..alpha).
template <int M, Pass P, int... Row>
[[gnu::always_inline]] inline void AllRows(std::integer_sequence<int, Row...>,
                                           const float* const* in, float* const* out,
                                           int64_t length) {
  (Combine<M, P, Row>(std::make_integer_sequence<int, M + 2>{}, in, out[Row], length), ...);
}

// n images of h×w, laid out grid_h × grid_w per canvas (image i of canvas v at grid cell
// (i / grid_w, i % grid_w)) with one zero row/column between neighbours; a canvas is
// canvas_h × canvas_w and split into tiles_h × tiles_w tiles. One image per canvas is
// grid 1×1 and canvas h×w.
struct Geometry {
  int64_t n, c, k, h, w;
  int64_t grid_h = 1, grid_w = 1, canvases = 0, canvas_h = 0, canvas_w = 0;
  int64_t tiles_h = 0, tiles_w = 0;
};

// The image at a canvas row (y in [0, canvas_h)) and grid column, with the row inside that
// image; image < 0 for a gap row or an empty grid cell.
struct CanvasCell {
  int64_t image, row;
};

inline CanvasCell CellAt(const Geometry& g, int64_t canvas, int64_t y, int64_t grid_col) {
  const int64_t grid_row = y / (g.h + 1), row = y % (g.h + 1);
  const int64_t image = (canvas * g.grid_h + grid_row) * g.grid_w + grid_col;
  return {row == g.h || image >= g.n ? -1 : image, row};
}

// A run of tile rows [tile_row0, tile_row0 + rows) of one canvas, whose tiles are the
// contiguous columns [offset, offset + rows · tiles_w) of the chunk's GEMM operands.
struct Segment {
  int64_t canvas, tile_row0, rows, offset;
};

std::vector<Segment> SegmentsOf(const Geometry& g, int64_t row0, int64_t rows) {
  std::vector<Segment> segments;
  int64_t offset = 0;
  for (int64_t row = row0; row < row0 + rows;) {
    const int64_t canvas = row / g.tiles_h, tile_row = row % g.tiles_h;
    const int64_t take = std::min(g.tiles_h - tile_row, row0 + rows - row);
    segments.push_back({canvas, tile_row, take, offset});
    offset += take * g.tiles_w;
    row += take;
  }
  return segments;
}

// Lays the images out so that they need the fewest tiles: one per canvas, or (for several
// small images) a grid of them on one canvas.
void PlanCanvas(Geometry& g, int64_t m) {
  auto tiles = [m](int64_t h, int64_t w) { return ((h + m - 1) / m) * ((w + m - 1) / m); };
  int64_t best = g.n * tiles(g.h, g.w);
  g.grid_h = g.grid_w = 1;
  for (int64_t cols = 1; g.n > 1 && cols <= g.n && cols * (g.w + 1) - 1 <= kMaxCanvasWidth;
       ++cols) {
    const int64_t rows = (g.n + cols - 1) / cols;
    const int64_t packed = tiles(rows * (g.h + 1) - 1, cols * (g.w + 1) - 1);
    if (packed < best) {
      best = packed;
      g.grid_h = rows;
      g.grid_w = cols;
    }
  }
  g.canvases = (g.n + g.grid_h * g.grid_w - 1) / (g.grid_h * g.grid_w);
  g.canvas_h = g.grid_h * (g.h + 1) - 1;
  g.canvas_w = g.grid_w * (g.w + 1) - 1;
  g.tiles_h = (g.canvas_h + m - 1) / m;
  g.tiles_w = (g.canvas_w + m - 1) / m;
}

// Row y of channel c of a canvas, zero-padded: dst[0] and dst[1 + canvas_w, band_w) are the
// convolution's padding; rows outside the canvas are all zeros.
inline void CanvasRow(const float* x, const Geometry& g, int64_t canvas, int64_t c, int64_t y,
                      float* dst, int64_t band_w) {
  if (y < 0 || y >= g.canvas_h) {
    std::fill(dst, dst + band_w, 0.f);
    return;
  }
  float* p = dst;
  *p++ = 0.f;
  for (int64_t col = 0; col < g.grid_w; ++col) {
    if (col > 0)
      *p++ = 0.f;
    const CanvasCell cell = CellAt(g, canvas, y, col);
    if (cell.image < 0) {
      std::fill(p, p + g.w, 0.f);
    } else {
      const float* src = x + ((cell.image * g.c + c) * g.h + cell.row) * g.w;
      std::copy(src, src + g.w, p);
    }
    p += g.w;
  }
  std::fill(p, dst + band_w, 0.f);
}

// The per-channel work of TransformInput for channels [c0, c1), with scratch buffers.
template <int M>
[[gnu::always_inline]] inline void InputChannels(const float* x, const Geometry& g,
                                                 const std::vector<Segment>& segments,
                                                 int64_t chunk_tiles, float* v, int64_t c0,
                                                 int64_t c1, float* band, float* taps,
                                                 float* horizontal) {
  constexpr int A = M + 2;
  const int64_t band_w = g.tiles_w * M + 2;
  for (int64_t c = c0; c < c1; ++c) {
    for (const auto& seg : segments) {
      const int64_t band_rows = seg.rows * M + 2;
      for (int64_t b = 0; b < band_rows; ++b)
        CanvasRow(x, g, seg.canvas, c, seg.tile_row0 * M - 1 + b, band + b * band_w, band_w);
      for (int a = 0; a < A; ++a)
        for (int s = 0; s < A; ++s) {
          float* out = taps + (a * A + s) * chunk_tiles + seg.offset;
          for (int64_t i = 0; i < seg.rows; ++i) {
            const float* src = band + (i * M + a) * band_w + s;
            for (int64_t j = 0; j < g.tiles_w; ++j)
              out[i * g.tiles_w + j] = src[j * M];
          }
        }
    }
    // d·B: row a of every tile, combined across its columns s.
    for (int a = 0; a < A; ++a) {
      const float* in[A];
      float* out[A];
      for (int s = 0; s < A; ++s) {
        in[s] = taps + (a * A + s) * chunk_tiles;
        out[s] = horizontal + (a * A + s) * chunk_tiles;
      }
      AllRows<M, Pass::kInput>(std::make_integer_sequence<int, A>{}, in, out, chunk_tiles);
    }
    // Bᵀ·(d·B): column s of every tile, combined across its rows a, into v.
    for (int s = 0; s < A; ++s) {
      const float* in[A];
      float* out[A];
      for (int a = 0; a < A; ++a) {
        in[a] = horizontal + (a * A + s) * chunk_tiles;
        out[a] = v + ((a * A + s) * g.c + c) * chunk_tiles;
      }
      AllRows<M, Pass::kInput>(std::make_integer_sequence<int, A>{}, in, out, chunk_tiles);
    }
  }
}

// The per-channel work of TransformOutput for channels [k0, k1), with scratch buffers.
template <int M>
[[gnu::always_inline]] inline void OutputChannels(const float* m, const float* bias, bool relu,
                                                  const Geometry& g,
                                                  const std::vector<Segment>& segments,
                                                  int64_t chunk_tiles, float* y, int64_t k0,
                                                  int64_t k1, float* horizontal, float* tiles,
                                                  float* line) {
  constexpr int A = M + 2;
  for (int64_t k = k0; k < k1; ++k) {
    const float b = bias ? bias[k] : 0.f;
    // m·A: row a of every tile, combined across its columns.
    for (int a = 0; a < A; ++a) {
      const float* in[A];
      float* out[M];
      for (int s = 0; s < A; ++s)
        in[s] = m + ((a * A + s) * g.k + k) * chunk_tiles;
      for (int col = 0; col < M; ++col)
        out[col] = horizontal + (a * M + col) * chunk_tiles;
      AllRows<M, Pass::kOutput>(std::make_integer_sequence<int, M>{}, in, out, chunk_tiles);
    }
    // Aᵀ·(m·A): column col of every tile, combined across its rows.
    for (int col = 0; col < M; ++col) {
      const float* in[A];
      float* out[M];
      for (int a = 0; a < A; ++a)
        in[a] = horizontal + (a * M + col) * chunk_tiles;
      for (int row = 0; row < M; ++row)
        out[row] = tiles + (row * M + col) * chunk_tiles;
      AllRows<M, Pass::kOutput>(std::make_integer_sequence<int, M>{}, in, out, chunk_tiles);
    }
    // Bias and ReLU over the contiguous tiles (branch-free, vectorised; NaN stays NaN
    // as in torch.relu), then a plain scatter into the output rows.
    float* t = tiles;
    const int64_t count = M * M * chunk_tiles;
    if (relu) {
      for (int64_t p = 0; p < count; ++p) {
        const float value = t[p] + b;
        t[p] = value < 0.f ? 0.f : value;
      }
    } else {
      for (int64_t p = 0; p < count; ++p)
        t[p] += b;
    }
    // One image per canvas: straight into the output row. A grid of images: the canvas
    // row is assembled in `line`, then each image's part is copied out (gaps dropped).
    const bool single = g.grid_h * g.grid_w == 1;
    for (const auto& seg : segments) {
      for (int64_t i = 0; i < seg.rows; ++i) {
        for (int row = 0; row < M; ++row) {
          const int64_t out_y = (seg.tile_row0 + i) * M + row;
          if (out_y >= g.canvas_h)
            break;
          const float* src[M];
          for (int col = 0; col < M; ++col)
            src[col] = t + (row * M + col) * chunk_tiles + seg.offset + i * g.tiles_w;
          float* dst = single ? y + ((seg.canvas * g.k + k) * g.h + out_y) * g.w : line;
          const int64_t full = g.canvas_w / M;  // tiles whose M columns all lie inside
          for (int64_t j = 0; j < full; ++j)
            for (int col = 0; col < M; ++col)
              dst[j * M + col] = src[col][j];
          for (int col = 0; full * M + col < g.canvas_w; ++col)
            dst[full * M + col] = src[col][full];
          if (single)
            continue;
          for (int64_t grid_col = 0; grid_col < g.grid_w; ++grid_col) {
            const CanvasCell cell = CellAt(g, seg.canvas, out_y, grid_col);
            if (cell.image < 0)
              continue;
            const float* from = line + grid_col * (g.w + 1);
            std::copy(from, from + g.w, y + ((cell.image * g.k + k) * g.h + cell.row) * g.w);
          }
        }
      }
    }
  }
}

// The transforms are long runs of constant combinations over contiguous floats: on CPUs
// with AVX2 (every x86 server since 2013) the same code compiled for 8-wide vectors runs
// them about twice as fast as the SSE2 baseline the library is built for. Only these two
// functions are compiled for AVX2 and they run only after the CPU says it has it. On arm64
// the baseline is already vectorised (NEON, 4-wide, part of ARMv8-A): there is only it.
#if defined(__x86_64__) || defined(__i386__)
#define MRCNN_WINOGRAD_AVX2 1
template <int M>
[[gnu::target("avx2,fma")]] void InputChannelsAvx2(const float* x, const Geometry& g,
                                                   const std::vector<Segment>& segments,
                                                   int64_t chunk_tiles, float* v, int64_t c0,
                                                   int64_t c1, float* band, float* taps,
                                                   float* horizontal) {
  InputChannels<M>(x, g, segments, chunk_tiles, v, c0, c1, band, taps, horizontal);
}

#endif

template <int M>
void InputChannelsBaseline(const float* x, const Geometry& g, const std::vector<Segment>& segments,
                           int64_t chunk_tiles, float* v, int64_t c0, int64_t c1, float* band,
                           float* taps, float* horizontal) {
  InputChannels<M>(x, g, segments, chunk_tiles, v, c0, c1, band, taps, horizontal);
}

#if MRCNN_WINOGRAD_AVX2
template <int M>
[[gnu::target("avx2,fma")]] void OutputChannelsAvx2(const float* m, const float* bias, bool relu,
                                                    const Geometry& g,
                                                    const std::vector<Segment>& segments,
                                                    int64_t chunk_tiles, float* y, int64_t k0,
                                                    int64_t k1, float* horizontal, float* tiles,
                                                    float* line) {
  OutputChannels<M>(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal, tiles, line);
}

#endif

template <int M>
void OutputChannelsBaseline(const float* m, const float* bias, bool relu, const Geometry& g,
                            const std::vector<Segment>& segments, int64_t chunk_tiles, float* y,
                            int64_t k0, int64_t k1, float* horizontal, float* tiles, float* line) {
  OutputChannels<M>(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal, tiles, line);
}

#if MRCNN_WINOGRAD_AVX2
bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

// Writes the transformed input of the chunk's tiles into v: alpha² × C × chunk_tiles.
// Per channel: the alpha² taps of every tile of the chunk gathered into contiguous runs
// (through a zero-padded band of input rows per segment), then Bᵀ·d·B as two passes of
// constant combinations over the whole chunk, vectorised over tiles whatever the image
// size (a 14×14 RoI has only 16 tiles of 4×4).
template <int M>
void TransformInput(const float* x, const Geometry& g, const std::vector<Segment>& segments,
                    int64_t chunk_tiles, float* v) {
  constexpr int A = M + 2;
  const int64_t band_w = g.tiles_w * M + 2;
  int64_t max_rows = 0;
  for (const auto& s : segments)
    max_rows = std::max(max_rows, s.rows);
#if MRCNN_WINOGRAD_AVX2
  const auto Input = CpuHasAvx2() ? &InputChannelsAvx2<M> : &InputChannelsBaseline<M>;
#else
  const auto Input = &InputChannelsBaseline<M>;
#endif
  at::parallel_for(0, g.c, 4, [&](int64_t c0, int64_t c1) {
    std::vector<float> band((max_rows * M + 2) * band_w), taps(A * A * chunk_tiles),
        horizontal(A * A * chunk_tiles);
    Input(x, g, segments, chunk_tiles, v, c0, c1, band.data(), taps.data(), horizontal.data());
  });
}

// Inverse transform of the GEMM output m (alpha² × K × chunk_tiles), plus bias and
// optional ReLU, scattered into the N×K×H×W output y.
template <int M>
void TransformOutput(const float* m, const float* bias, bool relu, const Geometry& g,
                     const std::vector<Segment>& segments, int64_t chunk_tiles, float* y) {
  constexpr int A = M + 2;
#if MRCNN_WINOGRAD_AVX2
  const auto Output = CpuHasAvx2() ? &OutputChannelsAvx2<M> : &OutputChannelsBaseline<M>;
#else
  const auto Output = &OutputChannelsBaseline<M>;
#endif
  at::parallel_for(0, g.k, 4, [&](int64_t k0, int64_t k1) {
    std::vector<float> horizontal(A * M * chunk_tiles), tiles(M * M * chunk_tiles),
        line(g.tiles_w * M);
    Output(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal.data(), tiles.data(),
           line.data());
  });
}

template <int M>
at::Tensor TransformWeightImpl(const at::Tensor& weight) {
  constexpr int A = M + 2;
  const at::Tensor w = weight.to(at::kDouble).contiguous();
  const int64_t k = w.size(0), c = w.size(1);
  at::Tensor u = at::empty({A * A, k, c}, weight.options().dtype(at::kFloat));
  const double* pw = w.data_ptr<double>();
  float* pu = u.data_ptr<float>();
  at::parallel_for(0, k * c, 64, [&](int64_t begin, int64_t end) {
    for (int64_t kc = begin; kc < end; ++kc) {
      const double* g = pw + kc * 9;
      double left[A][3];  // G·g
      for (int r = 0; r < A; ++r)
        for (int s = 0; s < 3; ++s) {
          double sum = 0;
          for (int q = 0; q < 3; ++q)
            sum += WinogradTile<M>::kG[r][q] * g[q * 3 + s];
          left[r][s] = sum;
        }
      for (int r = 0; r < A; ++r)
        for (int s = 0; s < A; ++s) {
          double sum = 0;
          for (int q = 0; q < 3; ++q)
            sum += left[r][q] * WinogradTile<M>::kG[s][q];
          pu[(r * A + s) * k * c + kc] = static_cast<float>(sum);
        }
    }
  });
  return u;
}

void CheckTile(const char* op, int64_t tile) {
  TORCH_CHECK(tile == 2 || tile == 4 || tile == 6, op,
              ": tile must be 2 (F(2×2,3×3)), 4 (F(4×4,3×3)) or 6 (F(6×6,3×3)), got ", tile);
}

at::Tensor WinogradWeightCpu(const at::Tensor& weight, int64_t tile) {
  const char* op = "mrcnn::conv3x3_winograd_weight";
  CheckTile(op, tile);
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3, op,
              ": weight must be K×C×3×3, got shape ", weight.sizes());
  TORCH_CHECK(weight.is_floating_point(), op, ": weight must be floating point, got ",
              weight.scalar_type());
  switch (tile) {
    case 2:
      return TransformWeightImpl<2>(weight);
    case 4:
      return TransformWeightImpl<4>(weight);
    default:
      return TransformWeightImpl<6>(weight);
  }
}

template <int M>
void ConvImpl(const at::Tensor& x, const at::Tensor& u, const float* bias, bool relu,
              const Geometry& g, at::Tensor& y) {
  constexpr int A = M + 2;
  const int64_t total_rows = g.canvases * g.tiles_h;
  const int64_t rows_per_chunk = std::max<int64_t>(1, kTransformedPerChunk / (A * A) / g.tiles_w);
  const int64_t chunks = (total_rows + rows_per_chunk - 1) / rows_per_chunk;
  const float* px = x.data_ptr<float>();
  float* py = y.data_ptr<float>();
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    at::Tensor v, m;
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t row0 = chunk * rows_per_chunk;
      const int64_t rows = std::min(rows_per_chunk, total_rows - row0);
      const int64_t tiles = rows * g.tiles_w;
      if (!v.defined() || v.size(2) != tiles) {
        v = at::empty({A * A, g.c, tiles}, x.options());
        m = at::empty({A * A, g.k, tiles}, x.options());
      }
      const std::vector<Segment> segments = SegmentsOf(g, row0, rows);
      TransformInput<M>(px, g, segments, tiles, v.data_ptr<float>());
      at::bmm_out(m, u, v);
      TransformOutput<M>(m.data_ptr<float>(), bias, relu, g, segments, tiles, py);
    }
  });
}

at::Tensor WinogradConvCpu(const at::Tensor& input, const at::Tensor& transformed,
                           const std::optional<at::Tensor>& bias_in, bool relu, int64_t tile) {
  const char* op = "mrcnn::conv3x3_winograd";
  CheckTile(op, tile);
  const int64_t alpha = tile + 2;
  TORCH_CHECK(input.dim() == 4, op, ": input must be N×C×H×W, got shape ", input.sizes());
  TORCH_CHECK(input.scalar_type() == at::kFloat, op, ": input must be float32, got ",
              input.scalar_type());
  TORCH_CHECK(transformed.dim() == 3 && transformed.size(0) == alpha * alpha &&
                  transformed.size(2) == input.size(1) && transformed.scalar_type() == at::kFloat,
              op, ": transformed weight must be float32 ", alpha * alpha, "×K×", input.size(1),
              " from conv3x3_winograd_weight(weight, ", tile, "), got ", transformed.sizes(), " ",
              transformed.scalar_type());
  Geometry g{input.size(0), input.size(1), transformed.size(1), input.size(2), input.size(3)};
  at::Tensor bias;
  if (bias_in.has_value() && bias_in->defined()) {
    TORCH_CHECK(bias_in->dim() == 1 && bias_in->size(0) == g.k, op, ": bias must have ", g.k,
                " elements, got shape ", bias_in->sizes());
    bias = bias_in->to(at::kFloat).contiguous();
  }
  at::Tensor y = at::empty({g.n, g.k, g.h, g.w}, input.options());
  if (y.numel() == 0)
    return y;
  PlanCanvas(g, tile);
  const at::Tensor x = input.contiguous();
  const at::Tensor u = transformed.contiguous();
  const float* pb = bias.defined() ? bias.data_ptr<float>() : nullptr;
  switch (tile) {
    case 2:
      ConvImpl<2>(x, u, pb, relu, g, y);
      break;
    case 4:
      ConvImpl<4>(x, u, pb, relu, g, y);
      break;
    default:
      ConvImpl<6>(x, u, pb, relu, g, y);
  }
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("conv3x3_winograd_weight", &WinogradWeightCpu);
  m.impl("conv3x3_winograd", &WinogradConvCpu);
}

}  // namespace mrcnn::kernels
