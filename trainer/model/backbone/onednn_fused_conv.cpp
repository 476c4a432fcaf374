#include "trainer/model/backbone/onednn_fused_conv.h"

#include <ATen/Parallel.h>
#include <ATen/core/List.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/conv2d.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace mrcnn::model {
namespace {

std::optional<c10::OperatorHandle> Find(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

const std::optional<c10::OperatorHandle>& PointwiseOp() {
  static const auto op = Find("mkldnn::_convolution_pointwise", "");
  return op;
}

const std::optional<c10::OperatorHandle>& AccumulateOp() {
  static const auto op = Find("mkldnn::_convolution_pointwise_", "binary");
  return op;
}

c10::IValue OptionalTensor(const at::Tensor& t) {
  return t.defined() ? c10::IValue(t) : c10::IValue();
}

void PushGeometry(torch::jit::Stack& stack, const ConvGeometry& g) {
  stack.emplace_back(g.padding);
  stack.emplace_back(g.stride);
  stack.emplace_back(g.dilation);
  stack.emplace_back(g.groups);
}

std::atomic<bool> fused_failed{false};

// Runs `fused`; if it throws, turns the fused ops off and runs `unfused` instead.
template <typename Fused, typename Unfused>
at::Tensor FusedOr(Fused fused, Unfused unfused) {
  if (OneDnnFusedConvAvailable()) {
    try {
      return fused();
    } catch (const c10::Error&) {
      fused_failed = true;
    }
  }
  return unfused();
}

}  // namespace

bool OneDnnFusedConvAvailable() {
  static const bool registered = PointwiseOp().has_value() && AccumulateOp().has_value();
  return registered && !fused_failed;
}

void DisableOneDnnFusedConv() {
  fused_failed = true;
}

at::Tensor OneDnnConv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const ConvGeometry& geometry, bool relu) {
  return FusedOr(
      [&] {
        // mkldnn::_convolution_pointwise(X, W, B?, padding, stride, dilation, groups, attr,
        //                                scalars, algorithm)
        torch::jit::Stack stack;
        stack.emplace_back(x);
        stack.emplace_back(weight);
        stack.emplace_back(OptionalTensor(bias));
        PushGeometry(stack, geometry);
        stack.emplace_back(std::string(relu ? "relu" : "none"));
        stack.emplace_back(c10::List<std::optional<at::Scalar>>());
        stack.emplace_back(c10::IValue());
        PointwiseOp()->callBoxed(&stack);
        return stack.at(0).toTensor();
      },
      [&] {
        at::Tensor y = at::conv2d(x, weight, bias, geometry.stride, geometry.padding,
                                  geometry.dilation, geometry.groups);
        if (relu)
          ReluBf16InPlace(y);
        return y;
      });
}

at::Tensor OneDnnConvAccumulate(at::Tensor accumulator, const at::Tensor& x,
                                const at::Tensor& weight, const at::Tensor& bias,
                                const ConvGeometry& geometry, bool relu) {
  // mkldnn::_convolution_pointwise_.binary(other!, X, W, B?, padding, stride, dilation,
  //     groups, binary_attr, alpha, unary_attr, unary_scalars, unary_algorithm): "add" is
  // oneDNN's sum post-op there; PyTorch takes no unary post-op after it, hence the ReLU below.
  accumulator = FusedOr(
      [&] {
        torch::jit::Stack stack;
        stack.emplace_back(accumulator);
        stack.emplace_back(x);
        stack.emplace_back(weight);
        stack.emplace_back(OptionalTensor(bias));
        PushGeometry(stack, geometry);
        stack.emplace_back(std::string("add"));
        stack.emplace_back(at::Scalar(1.0));
        stack.emplace_back(c10::IValue());
        stack.emplace_back(c10::List<std::optional<at::Scalar>>());
        stack.emplace_back(c10::IValue());
        AccumulateOp()->callBoxed(&stack);
        return accumulator;
      },
      [&] {
        return accumulator.add_(at::conv2d(x, weight, bias, geometry.stride, geometry.padding,
                                           geometry.dilation, geometry.groups));
      });
  if (relu)
    ReluBf16InPlace(accumulator);
  return accumulator;
}

void ReluBf16InPlace(at::Tensor& t) {
  if (t.scalar_type() != at::kBFloat16 || !t.is_cpu() || !t.is_non_overlapping_and_dense())
    throw std::invalid_argument("ReluBf16InPlace: needs a dense bf16 CPU tensor");
  auto* bits = static_cast<uint16_t*>(t.data_ptr());
  at::parallel_for(0, t.numel(), 1 << 16, [bits](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint16_t v = bits[i];
      // Negative (sign bit) and not NaN (exponent all ones with a mantissa): zero.
      const bool negative = (v & 0x8000u) != 0 && (v & 0x7fffu) <= 0x7f80u;
      bits[i] = negative ? uint16_t{0} : v;
    }
  });
}

}  // namespace mrcnn::model
