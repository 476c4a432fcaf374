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

// Target number of tiles per chunk: alpha² × 256 channels × 384 tiles × 4 bytes is 14 MB
// for F(4×4) (6 MB for F(2×2)), input and output of the GEMMs together within a 32 MB L3.
constexpr int64_t kTilesPerChunk = 384;

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

struct Geometry {
  int64_t n, c, k, h, w, tiles_h, tiles_w;
};

// A run of tile rows [tile_row0, tile_row0 + rows) of one image, whose tiles are the
// contiguous columns [offset, offset + rows · tiles_w) of the chunk's GEMM operands.
struct Segment {
  int64_t image, tile_row0, rows, offset;
};

std::vector<Segment> SegmentsOf(const Geometry& g, int64_t row0, int64_t rows) {
  std::vector<Segment> segments;
  int64_t offset = 0;
  for (int64_t row = row0; row < row0 + rows;) {
    const int64_t image = row / g.tiles_h, tile_row = row % g.tiles_h;
    const int64_t take = std::min(g.tiles_h - tile_row, row0 + rows - row);
    segments.push_back({image, tile_row, take, offset});
    offset += take * g.tiles_w;
    row += take;
  }
  return segments;
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
      const float* plane = x + (seg.image * g.c + c) * g.h * g.w;
      const int64_t band_rows = seg.rows * M + 2;
      for (int64_t b = 0; b < band_rows; ++b) {
        float* dst = band + b * band_w;
        const int64_t y = seg.tile_row0 * M - 1 + b;
        if (y < 0 || y >= g.h) {
          std::fill(dst, dst + band_w, 0.f);
          continue;
        }
        dst[0] = 0.f;
        std::copy(plane + y * g.w, plane + (y + 1) * g.w, dst + 1);
        std::fill(dst + 1 + g.w, dst + band_w, 0.f);
      }
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
                                                  int64_t k1, float* horizontal, float* tiles) {
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
    for (const auto& seg : segments) {
      float* plane = y + (seg.image * g.k + k) * g.h * g.w;
      for (int64_t i = 0; i < seg.rows; ++i) {
        for (int row = 0; row < M; ++row) {
          const int64_t out_y = (seg.tile_row0 + i) * M + row;
          if (out_y >= g.h)
            break;
          float* dst = plane + out_y * g.w;
          const float* src[M];
          for (int col = 0; col < M; ++col)
            src[col] = t + (row * M + col) * chunk_tiles + seg.offset + i * g.tiles_w;
          const int64_t full = g.w / M;  // tiles whose M columns all lie inside the image
          for (int64_t j = 0; j < full; ++j)
            for (int col = 0; col < M; ++col)
              dst[j * M + col] = src[col][j];
          for (int col = 0; full * M + col < g.w; ++col)
            dst[full * M + col] = src[col][full];
        }
      }
    }
  }
}

// The transforms are long runs of constant combinations over contiguous floats: on CPUs
// with AVX2 (every x86 server since 2013) the same code compiled for 8-wide vectors runs
// them about twice as fast as the SSE2 baseline the library is built for. Only these two
// functions are compiled for AVX2 and they run only after the CPU says it has it.
template <int M>
[[gnu::target("avx2,fma")]] void InputChannelsAvx2(const float* x, const Geometry& g,
                                                   const std::vector<Segment>& segments,
                                                   int64_t chunk_tiles, float* v, int64_t c0,
                                                   int64_t c1, float* band, float* taps,
                                                   float* horizontal) {
  InputChannels<M>(x, g, segments, chunk_tiles, v, c0, c1, band, taps, horizontal);
}

template <int M>
void InputChannelsBaseline(const float* x, const Geometry& g, const std::vector<Segment>& segments,
                           int64_t chunk_tiles, float* v, int64_t c0, int64_t c1, float* band,
                           float* taps, float* horizontal) {
  InputChannels<M>(x, g, segments, chunk_tiles, v, c0, c1, band, taps, horizontal);
}

template <int M>
[[gnu::target("avx2,fma")]] void OutputChannelsAvx2(const float* m, const float* bias, bool relu,
                                                    const Geometry& g,
                                                    const std::vector<Segment>& segments,
                                                    int64_t chunk_tiles, float* y, int64_t k0,
                                                    int64_t k1, float* horizontal, float* tiles) {
  OutputChannels<M>(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal, tiles);
}

template <int M>
void OutputChannelsBaseline(const float* m, const float* bias, bool relu, const Geometry& g,
                            const std::vector<Segment>& segments, int64_t chunk_tiles, float* y,
                            int64_t k0, int64_t k1, float* horizontal, float* tiles) {
  OutputChannels<M>(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal, tiles);
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

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
  const auto Input = CpuHasAvx2() ? &InputChannelsAvx2<M> : &InputChannelsBaseline<M>;
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
  const auto Output = CpuHasAvx2() ? &OutputChannelsAvx2<M> : &OutputChannelsBaseline<M>;
  at::parallel_for(0, g.k, 4, [&](int64_t k0, int64_t k1) {
    std::vector<float> horizontal(A * M * chunk_tiles), tiles(M * M * chunk_tiles);
    Output(m, bias, relu, g, segments, chunk_tiles, y, k0, k1, horizontal.data(), tiles.data());
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
  TORCH_CHECK(tile == 2 || tile == 4, op, ": tile must be 2 (F(2×2,3×3)) or 4 (F(4×4,3×3)), got ",
              tile);
}

at::Tensor WinogradWeightCpu(const at::Tensor& weight, int64_t tile) {
  const char* op = "mrcnn::conv3x3_winograd_weight";
  CheckTile(op, tile);
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3, op,
              ": weight must be K×C×3×3, got shape ", weight.sizes());
  TORCH_CHECK(weight.is_floating_point(), op, ": weight must be floating point, got ",
              weight.scalar_type());
  return tile == 2 ? TransformWeightImpl<2>(weight) : TransformWeightImpl<4>(weight);
}

template <int M>
void ConvImpl(const at::Tensor& x, const at::Tensor& u, const float* bias, bool relu,
              const Geometry& g, at::Tensor& y) {
  constexpr int A = M + 2;
  const int64_t total_rows = g.n * g.tiles_h;
  const int64_t rows_per_chunk = std::max<int64_t>(1, kTilesPerChunk / g.tiles_w);
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
  Geometry g{input.size(0), input.size(1), transformed.size(1), input.size(2), input.size(3), 0, 0};
  at::Tensor bias;
  if (bias_in.has_value() && bias_in->defined()) {
    TORCH_CHECK(bias_in->dim() == 1 && bias_in->size(0) == g.k, op, ": bias must have ", g.k,
                " elements, got shape ", bias_in->sizes());
    bias = bias_in->to(at::kFloat).contiguous();
  }
  at::Tensor y = at::empty({g.n, g.k, g.h, g.w}, input.options());
  if (y.numel() == 0)
    return y;
  g.tiles_h = (g.h + tile - 1) / tile;
  g.tiles_w = (g.w + tile - 1) / tile;
  const at::Tensor x = input.contiguous();
  const at::Tensor u = transformed.contiguous();
  const float* pb = bias.defined() ? bias.data_ptr<float>() : nullptr;
  if (tile == 2)
    ConvImpl<2>(x, u, pb, relu, g, y);
  else
    ConvImpl<4>(x, u, pb, relu, g, y);
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("conv3x3_winograd_weight", &WinogradWeightCpu);
  m.impl("conv3x3_winograd", &WinogradConvCpu);
}

}  // namespace mrcnn::kernels
