// CPU proposal matcher (torchvision Matcher semantics). Rows of the G×N quality
// matrix are walked in order so the inner loop over predictions is contiguous.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/matching/matcher_rules.h"

namespace mrcnn::kernels {
namespace {

template <typename T>
inline T NanMax(T best, T candidate) {
  return BeatsForMax(candidate, best) ? candidate : best;
}

at::Tensor MatchProposalsCpu(const at::Tensor& quality_in, double high_threshold,
                             double low_threshold, bool allow_low_quality_matches) {
  const char* op = "mrcnn::match_proposals";
  CheckMatchArgs(quality_in, high_threshold, low_threshold, op);
  const at::Tensor q = quality_in.contiguous();
  const int64_t g_count = q.size(0), n = q.size(1);
  at::Tensor out = at::empty({n}, q.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "matcher_cpu", [&] {
    const scalar_t* pq = q.data_ptr<scalar_t>();
    int64_t* po = out.data_ptr<int64_t>();
    // torch compares a float tensor with a Python float in the tensor's dtype.
    const scalar_t low = static_cast<scalar_t>(low_threshold);
    const scalar_t high = static_cast<scalar_t>(high_threshold);
    std::vector<scalar_t> gt_best(g_count);
    if (allow_low_quality_matches) {
      at::parallel_for(0, g_count, 1, [&](int64_t begin, int64_t end) {
        for (int64_t g = begin; g < end; ++g) {
          const scalar_t* row = pq + g * n;
          scalar_t best = row[0];
          for (int64_t i = 1; i < n; ++i) {
            best = NanMax(best, row[i]);
          }
          gt_best[g] = best;
        }
      });
    }
    at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
      const int64_t len = end - begin;
      std::vector<scalar_t> best(pq + begin, pq + end);
      std::vector<int64_t> arg(len, 0);
      std::vector<uint8_t> low_quality(len, 0);
      for (int64_t g = 0; g < g_count; ++g) {
        const scalar_t* row = pq + g * n + begin;
        for (int64_t i = 0; i < len; ++i) {
          const bool better = BeatsForMax(row[i], best[i]);
          best[i] = better ? row[i] : best[i];
          arg[i] = better ? g : arg[i];
        }
        if (allow_low_quality_matches) {
          const scalar_t gb = gt_best[g];
          for (int64_t i = 0; i < len; ++i) {
            low_quality[i] |= static_cast<uint8_t>(row[i] == gb);
          }
        }
      }
      for (int64_t i = 0; i < len; ++i) {
        po[begin + i] = MatchFromBest(best[i], arg[i], low, high, low_quality[i] != 0);
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("match_proposals", &MatchProposalsCpu);
}

}  // namespace mrcnn::kernels
