#pragma once
// SOLVER.CUDA_GRAPHS: the padded feature stage (padded_feature_stage.h) captured in CUDA
// graphs, one forward and one backward graph per configured shape, as NVIDIA's MLPerf
// Mask R-CNN and torch.cuda.make_graphed_callables do. A shape's graphs are captured the
// first time a batch is padded to it: three eager forward+backward passes on a side
// stream (cuDNN picks its algorithms, the allocator settles), then the capture. Every
// later step replays them: one launch instead of the stage's several hundred kernels.
// The backward graph computes the gradients of the stage's parameters for the incoming
// output gradients; they reach the parameters' .grad through autograd as usual, so AMP
// loss scaling, accumulation, clipping and the gradient all-reduce are unchanged.
//
// Contract: parameters are updated in place (never replaced) while the graphs live, and
// the stage is run forward then backward once per micro-batch (the trainer's order).
// Autocast is captured with the dtype given here.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>

#include "trainer/engine/cuda_graphs/padded_feature_stage.h"

namespace mrcnn::engine {

// Whether this build can capture CUDA graphs (it was compiled with CUDA).
bool CudaGraphsCompiled();

// The graphed stage. Throws std::runtime_error on a build without CUDA.
std::unique_ptr<PaddedFeatureStage> MakeCudaGraphedFeatureStage(
    model::MetaArchitecture& net, std::vector<std::array<int64_t, 2>> shapes, int64_t full_batch,
    std::optional<at::ScalarType> amp_dtype);

}  // namespace mrcnn::engine
