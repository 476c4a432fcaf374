#include "trainer/engine/distributed/gradient_bucketer.h"

namespace mrcnn::engine::dist {

GradientBucketer::GradientBucketer(std::vector<at::Tensor> params, size_t bucket_bytes)
    : params_(std::move(params)), buckets_(LayoutGradientBuckets(params_, bucket_bytes)) {}

void GradientBucketer::AllReduceMean(GradientReducer& reducer, int world_size) {
  for (auto& b : buckets_) {
    for (size_t i = 0; i < b.params.size(); ++i)
      PackGradient(params_[b.params[i]], b, i);
    reducer.SumInPlace(b.flat);
    UnpackMean(b, params_, world_size);
  }
}

}  // namespace mrcnn::engine::dist
