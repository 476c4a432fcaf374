// Arithmetic that gives the same bits in a CPU twin and its CUDA kernel. On the device, nvcc
// fuses a * b + c into one FMA (one rounding instead of two) unless told not to: these use
// the round-to-nearest intrinsics there, which it never fuses, and the plain operators on
// the host (our C++ is compiled in ISO mode, where g++ does not contract either). exp and log
// are the platform's (CUDA's and glibc's agree to the ulp the kernel tests allow).
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>

namespace mrcnn::kernels {

#ifdef __CUDA_ARCH__
__device__ inline float RnAdd(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline float RnSub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline float RnMul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline float RnDiv(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ inline double RnAdd(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline double RnSub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline double RnMul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline double RnDiv(double a, double b) {
  return __ddiv_rn(a, b);
}
template <typename T>
__device__ inline T HdLog(T x) {
  return log(x);
}
template <typename T>
__device__ inline T HdExp(T x) {
  return exp(x);
}
template <typename T>
__device__ inline bool HdIsNan(T x) {
  return isnan(x);
}
template <typename T>
__device__ inline T HdFloor(T x) {
  return floor(x);
}
#else
template <typename T>
inline T RnAdd(T a, T b) {
  return a + b;
}
template <typename T>
inline T RnSub(T a, T b) {
  return a - b;
}
template <typename T>
inline T RnMul(T a, T b) {
  return a * b;
}
template <typename T>
inline T RnDiv(T a, T b) {
  return a / b;
}
template <typename T>
inline T HdLog(T x) {
  return std::log(x);
}
template <typename T>
inline T HdExp(T x) {
  return std::exp(x);
}
template <typename T>
inline bool HdIsNan(T x) {
  return std::isnan(x);
}
template <typename T>
inline T HdFloor(T x) {
  return std::floor(x);
}
#endif

}  // namespace mrcnn::kernels
