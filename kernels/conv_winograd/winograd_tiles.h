// Transform matrices of Winograd's minimal filtering F(m×m, 3×3) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016): output tile m×m, input tile
// alpha×alpha with alpha = m + 2. Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A.
//
// F(2×2) multiplies 2.25× less than direct convolution and its transforms are exact in
// float (entries 0, ±1, ±1/2). F(4×4) multiplies 4× less; its entries up to 8 and 1/24
// cost about one more decimal digit of float accuracy (relative error ~1e-6 instead of
// ~1e-7 against a float64 convolution, see test/kernels). F(6×6) multiplies 5.1× less
// (interpolation points 0, ±1, ±2, ±1/2 and infinity); its error measured on the
// model's layers is ~1.5× that of F(4×4) (bench/kernels/bench_winograd.py).
#pragma once

namespace mrcnn::kernels {

template <int M>
struct WinogradTile;

template <>
struct WinogradTile<2> {
  static constexpr int kAlpha = 4;
  static constexpr double kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

template <>
struct WinogradTile<4> {
  static constexpr int kAlpha = 6;
  static constexpr double kBt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                                       {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                                       {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
  static constexpr double kAt[4][6] = {
      {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

template <>
struct WinogradTile<6> {
  static constexpr int kAlpha = 8;
  static constexpr double kBt[8][8] = {{1, 0, -21.0 / 4, 0, 21.0 / 4, 0, -1, 0},
                                       {0, 1, 1, -17.0 / 4, -17.0 / 4, 1, 1, 0},
                                       {0, -1, 1, 17.0 / 4, -17.0 / 4, -1, 1, 0},
                                       {0, 1.0 / 2, 1.0 / 4, -5.0 / 2, -5.0 / 4, 2, 1, 0},
                                       {0, -1.0 / 2, 1.0 / 4, 5.0 / 2, -5.0 / 4, -2, 1, 0},
                                       {0, 2, 4, -5.0 / 2, -5, 1.0 / 2, 1, 0},
                                       {0, -2, 4, 5.0 / 2, -5, -1.0 / 2, 1, 0},
                                       {0, -1, 0, 21.0 / 4, 0, -21.0 / 4, 0, 1}};
  static constexpr double kG[8][3] = {{1, 0, 0},
                                      {-2.0 / 9, -2.0 / 9, -2.0 / 9},
                                      {-2.0 / 9, 2.0 / 9, -2.0 / 9},
                                      {1.0 / 90, 1.0 / 45, 2.0 / 45},
                                      {1.0 / 90, -1.0 / 45, 2.0 / 45},
                                      {32.0 / 45, 16.0 / 45, 8.0 / 45},
                                      {32.0 / 45, -16.0 / 45, 8.0 / 45},
                                      {0, 0, 1}};
  static constexpr double kAt[6][8] = {{1, 1, 1, 1, 1, 1, 1, 0},
                                       {0, 1, -1, 2, -2, 1.0 / 2, -1.0 / 2, 0},
                                       {0, 1, 1, 4, 4, 1.0 / 4, 1.0 / 4, 0},
                                       {0, 1, -1, 8, -8, 1.0 / 8, -1.0 / 8, 0},
                                       {0, 1, 1, 16, 16, 1.0 / 16, 1.0 / 16, 0},
                                       {0, 1, -1, 32, -32, 1.0 / 32, -1.0 / 32, 1}};
};

}  // namespace mrcnn::kernels
