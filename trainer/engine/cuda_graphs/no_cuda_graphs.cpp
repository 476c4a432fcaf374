// Builds without CUDA: the config check (builders.cpp) refuses SOLVER.CUDA_GRAPHS before
// this is reached; the throw is for any other caller.
#include <stdexcept>

#include "trainer/engine/cuda_graphs/cuda_graphed_feature_stage.h"

namespace mrcnn::engine {

bool CudaGraphsCompiled() {
  return false;
}

std::unique_ptr<PaddedFeatureStage> MakeCudaGraphedFeatureStage(
    model::MetaArchitecture& /*net*/, std::vector<std::array<int64_t, 2>> /*shapes*/,
    int64_t /*full_batch*/, std::optional<at::ScalarType> /*amp_dtype*/) {
  throw std::runtime_error(
      "SOLVER.CUDA_GRAPHS needs a build with CUDA (this one was built with MRCNN_CUDA=OFF)");
}

}  // namespace mrcnn::engine
