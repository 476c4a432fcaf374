// CPU ROIAlign forward/backward for one level (mrcnn::roi_align) and for FPN levels
// (mrcnn::_multi_level_roi_align), with torchvision's sampling arithmetic. Forward is
// parallel over rois; backward is parallel over channels, so every thread owns whole
// gradient planes and needs no atomics.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/roi_align/roi_align_args.h"
#include "kernels/roi_align/roi_align_entry_points.h"
#include "kernels/roi_align/roi_align_sampling.h"

namespace mrcnn::kernels {
namespace {

template <typename acc_t>
using Sample = BilinearTaps<acc_t>;

// Taps of every sampling point of a roi, bin-major.
template <typename acc_t>
void ComputeSamples(const RoiGeometry<acc_t>& g, int64_t height, int64_t width, int64_t pooled_h,
                    int64_t pooled_w, std::vector<Sample<acc_t>>& samples) {
  samples.resize(static_cast<size_t>(pooled_h * pooled_w * g.grid_h * g.grid_w));
  size_t k = 0;
  for (int64_t ph = 0; ph < pooled_h; ++ph) {
    for (int64_t pw = 0; pw < pooled_w; ++pw) {
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const acc_t y = SamplePosition(g.start_h, g.bin_h, ph, iy, g.grid_h);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          const acc_t x = SamplePosition(g.start_w, g.bin_w, pw, ix, g.grid_w);
          samples[k++] = ComputeBilinearTaps(y, x, height, width);
        }
      }
    }
  }
}

template <typename acc_t>
void CheckSampleCount(const RoiGeometry<acc_t>& g, int64_t pooled_h, int64_t pooled_w, int64_t n) {
  TORCH_CHECK(!TooManySamples(pooled_h, pooled_w, g.grid_h, g.grid_w), "mrcnn::roi_align: roi ", n,
              " needs ", g.grid_h, "×", g.grid_w, " sampling points in each of its ", pooled_h, "×",
              pooled_w,
              " bins (adaptive sampling of a huge roi: check spatial_scale and the roi, "
              "or pass a positive sampling_ratio); at most 2^31-1 points per roi are supported");
}

// Above this many sampling points per roi (huge adaptive grids) the taps are computed
// on the fly instead of stored: same arithmetic, bounded memory.
constexpr double kMaxStoredSamples = 1 << 20;

inline bool StoreSamples(int64_t pooled_h, int64_t pooled_w, int64_t grid_h, int64_t grid_w) {
  return static_cast<double>(pooled_h) * static_cast<double>(pooled_w) *
             static_cast<double>(grid_h) * static_cast<double>(grid_w) <=
         kMaxStoredSamples;
}

// Rows and column span of a roi's taps in one plane. The gathers are latency-bound
// (each channel plane is a fresh cache miss), so the kernels prefetch this footprint
// a few channels ahead.
struct Footprint {
  std::vector<int64_t> rows;
  int64_t x_begin = 0, x_end = 0;  // elements, [begin, end)
};

template <typename acc_t>
void ComputeFootprint(const std::vector<Sample<acc_t>>& samples, int64_t width, Footprint& fp) {
  fp.rows.clear();
  int64_t x_min = width, x_max = -1;
  for (const auto& s : samples) {
    if (!s.valid)
      continue;
    fp.rows.push_back(s.p1 / width);
    fp.rows.push_back(s.p3 / width);
    x_min = std::min(x_min, s.p1 % width);
    x_max = std::max(x_max, s.p4 % width);
  }
  std::sort(fp.rows.begin(), fp.rows.end());
  fp.rows.erase(std::unique(fp.rows.begin(), fp.rows.end()), fp.rows.end());
  fp.x_begin = x_max < 0 ? 0 : x_min;
  fp.x_end = x_max < 0 ? 0 : x_max + 1;
}

template <typename T>
inline void PrefetchFootprint(const T* plane, int64_t width, const Footprint& fp, bool for_write) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t r : fp.rows) {
    const T* row = plane + r * width;
    for (int64_t x = fp.x_begin; x < fp.x_end + kLine; x += kLine) {
      if (for_write) {
        __builtin_prefetch(row + std::min(x, fp.x_end - 1), 1, 3);
      } else {
        __builtin_prefetch(row + std::min(x, fp.x_end - 1), 0, 3);
      }
    }
  }
}

constexpr int64_t kPrefetchChannels = 4;

template <typename scalar_t>
struct LevelView {
  const scalar_t* data;
  int64_t height, width;
  double scale;
};

// The level of roi n, or -1 when it names none: such a roi pools zeros and gets no
// gradient, as in torchvision's MultiScaleRoIAlign (and on CUDA).
int64_t LevelOf(const int64_t* levels, int64_t n, int64_t num_levels) {
  if (levels == nullptr) {
    return 0;
  }
  const int64_t l = levels[n];
  return l >= 0 && l < num_levels ? l : -1;
}

// Forward of one roi with taps computed on the fly (huge adaptive grids): the same
// arithmetic, in the same order, as the stored-taps loop of ForwardKernel.
template <typename scalar_t, typename acc_t>
void ForwardRoiOnTheFly(const RoiGeometry<acc_t>& g, const scalar_t* batch_base, int64_t height,
                        int64_t width, int64_t channels, int64_t pooled_h, int64_t pooled_w,
                        scalar_t* out) {
  const int64_t plane = height * width;
  for (int64_t c = 0; c < channels; ++c) {
    const scalar_t* in = batch_base + c * plane;
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        acc_t v = 0;
        for (int64_t iy = 0; iy < g.grid_h; ++iy) {
          const acc_t y = SamplePosition(g.start_h, g.bin_h, ph, iy, g.grid_h);
          for (int64_t ix = 0; ix < g.grid_w; ++ix) {
            const auto t = ComputeBilinearTaps(
                y, SamplePosition(g.start_w, g.bin_w, pw, ix, g.grid_w), height, width);
            v += t.w1 * static_cast<acc_t>(in[t.p1]) + t.w2 * static_cast<acc_t>(in[t.p2]) +
                 t.w3 * static_cast<acc_t>(in[t.p3]) + t.w4 * static_cast<acc_t>(in[t.p4]);
          }
        }
        out[(c * pooled_h + ph) * pooled_w + pw] = static_cast<scalar_t>(v / g.count);
      }
    }
  }
}

template <typename scalar_t>
void ForwardKernel(const std::vector<LevelView<scalar_t>>& levels_view, const int64_t* levels,
                   const scalar_t* rois, int64_t num_rois, int64_t batch, int64_t channels,
                   int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                   scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t bins = pooled_h * pooled_w;
  const int64_t num_levels = static_cast<int64_t>(levels_view.size());
  at::parallel_for(0, num_rois, 1, [&](int64_t begin, int64_t end) {
    std::vector<Sample<acc_t>> samples;
    Footprint fp;
    for (int64_t n = begin; n < end; ++n) {
      const int64_t l = LevelOf(levels, n, num_levels);
      if (l < 0) {
        std::fill_n(out + n * channels * bins, channels * bins, scalar_t(0));
        continue;
      }
      const LevelView<scalar_t>& lv = levels_view[l];
      const auto g = ComputeRoiGeometry<int64_t>(rois + n * 5, static_cast<acc_t>(lv.scale),
                                                 pooled_h, pooled_w, sampling_ratio, aligned);
      TORCH_CHECK(g.batch >= 0 && g.batch < batch, "mrcnn::roi_align: roi ", n, " has batch index ",
                  static_cast<double>(rois[n * 5]), " outside [0, ", batch, ")");
      CheckSampleCount(g, pooled_h, pooled_w, n);
      const int64_t plane = lv.height * lv.width;
      if (plane == 0) {  // an empty map: nothing to sample
        std::fill_n(out + n * channels * bins, channels * bins, scalar_t(0));
        continue;
      }
      const scalar_t* batch_base = lv.data + g.batch * channels * plane;
      if (!StoreSamples(pooled_h, pooled_w, g.grid_h, g.grid_w)) {
        ForwardRoiOnTheFly(g, batch_base, lv.height, lv.width, channels, pooled_h, pooled_w,
                           out + n * channels * bins);
        continue;
      }
      ComputeSamples(g, lv.height, lv.width, pooled_h, pooled_w, samples);
      const int64_t per_bin = g.grid_h * g.grid_w;
      ComputeFootprint(samples, lv.width, fp);
      for (int64_t c = 0; c < std::min(kPrefetchChannels, channels); ++c) {
        PrefetchFootprint(batch_base + c * plane, lv.width, fp, false);
      }
      // kChannelBlock channels share each sample's taps and weights, so the tap
      // metadata is loaded once per block instead of once per channel.
      constexpr int64_t kChannelBlock = 4;
      for (int64_t c0 = 0; c0 < channels; c0 += kChannelBlock) {
        const int64_t cb = std::min(kChannelBlock, channels - c0);
        for (int64_t c = c0 + kPrefetchChannels;
             c < std::min(c0 + kPrefetchChannels + cb, channels); ++c) {
          PrefetchFootprint(batch_base + c * plane, lv.width, fp, false);
        }
        const scalar_t* in[kChannelBlock];
        for (int64_t j = 0; j < kChannelBlock; ++j) {
          in[j] = batch_base + (c0 + std::min(j, cb - 1)) * plane;
        }
        scalar_t* o = out + (n * channels + c0) * bins;
        const Sample<acc_t>* s = samples.data();
        for (int64_t b = 0; b < bins; ++b) {
          acc_t v[kChannelBlock] = {};
          // Out-of-map samples add 0 * in[0], as torchvision's CPU forward does.
          for (int64_t k = 0; k < per_bin; ++k, ++s) {
            const Sample<acc_t> t = *s;
            for (int64_t j = 0; j < kChannelBlock; ++j) {
              v[j] +=
                  t.w1 * static_cast<acc_t>(in[j][t.p1]) + t.w2 * static_cast<acc_t>(in[j][t.p2]) +
                  t.w3 * static_cast<acc_t>(in[j][t.p3]) + t.w4 * static_cast<acc_t>(in[j][t.p4]);
            }
          }
          for (int64_t j = 0; j < cb; ++j) {
            o[j * bins + b] = static_cast<scalar_t>(v[j] / g.count);
          }
        }
      }
    }
  });
}

// Forward over channels-last maps (N×H×W×C in memory, as the reduced-precision inference path
// hands over its FPN maps): a tap's four corners are each C contiguous values, so every
// sample is one multiply-add over the channel vector instead of four gathers per channel.
// Same arithmetic per channel, in the same order, as ForwardKernel: the results are
// bit-identical. Only for a fixed sampling grid (sampling_ratio > 0), whose taps are stored.
template <typename scalar_t>
void ForwardKernelChannelsLast(const std::vector<LevelView<scalar_t>>& levels_view,
                               const int64_t* levels, const scalar_t* rois, int64_t num_rois,
                               int64_t batch, int64_t channels, int64_t pooled_h, int64_t pooled_w,
                               int64_t sampling_ratio, bool aligned, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t bins = pooled_h * pooled_w;
  const int64_t num_levels = static_cast<int64_t>(levels_view.size());
  at::parallel_for(0, num_rois, 1, [&](int64_t begin, int64_t end) {
    std::vector<Sample<acc_t>> samples;
    std::vector<acc_t> acc(static_cast<size_t>(channels));
    for (int64_t n = begin; n < end; ++n) {
      const int64_t l = LevelOf(levels, n, num_levels);
      const LevelView<scalar_t>* lv = l < 0 ? nullptr : &levels_view[l];
      if (lv == nullptr || lv->height * lv->width == 0) {
        std::fill_n(out + n * channels * bins, channels * bins, scalar_t(0));
        continue;
      }
      const auto g = ComputeRoiGeometry<int64_t>(rois + n * 5, static_cast<acc_t>(lv->scale),
                                                 pooled_h, pooled_w, sampling_ratio, aligned);
      TORCH_CHECK(g.batch >= 0 && g.batch < batch, "mrcnn::roi_align: roi ", n, " has batch index ",
                  static_cast<double>(rois[n * 5]), " outside [0, ", batch, ")");
      ComputeSamples(g, lv->height, lv->width, pooled_h, pooled_w, samples);
      const scalar_t* base = lv->data + g.batch * lv->height * lv->width * channels;
      const int64_t per_bin = g.grid_h * g.grid_w;
      const Sample<acc_t>* s = samples.data();
      scalar_t* o = out + n * channels * bins;
      acc_t* a = acc.data();
      for (int64_t b = 0; b < bins; ++b) {
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t k = 0; k < per_bin; ++k, ++s) {
          const Sample<acc_t> t = *s;
          const scalar_t* c1 = base + t.p1 * channels;
          const scalar_t* c2 = base + t.p2 * channels;
          const scalar_t* c3 = base + t.p3 * channels;
          const scalar_t* c4 = base + t.p4 * channels;
          for (int64_t c = 0; c < channels; ++c) {
            a[c] += t.w1 * static_cast<acc_t>(c1[c]) + t.w2 * static_cast<acc_t>(c2[c]) +
                    t.w3 * static_cast<acc_t>(c3[c]) + t.w4 * static_cast<acc_t>(c4[c]);
          }
        }
        for (int64_t c = 0; c < channels; ++c)
          o[c * bins + b] = static_cast<scalar_t>(a[c] / g.count);
      }
    }
  });
}

// Backward of one roi for channels [c_begin, c_end) with taps computed on the fly: the
// same arithmetic, in the same order, as the stored-taps loop of BackwardKernel.
template <typename scalar_t, typename acc_t>
void BackwardRoiOnTheFly(const RoiGeometry<acc_t>& g, acc_t* batch_base, int64_t height,
                         int64_t width, int64_t c_begin, int64_t c_end, int64_t pooled_h,
                         int64_t pooled_w, const scalar_t* go, int64_t sc, int64_t sh, int64_t sw) {
  const int64_t plane = height * width;
  for (int64_t c = c_begin; c < c_end; ++c) {
    acc_t* gin = batch_base + c * plane;
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        const acc_t gbin = static_cast<acc_t>(go[c * sc + ph * sh + pw * sw]);
        for (int64_t iy = 0; iy < g.grid_h; ++iy) {
          const acc_t y = SamplePosition(g.start_h, g.bin_h, ph, iy, g.grid_h);
          for (int64_t ix = 0; ix < g.grid_w; ++ix) {
            const auto t = ComputeBilinearTaps(
                y, SamplePosition(g.start_w, g.bin_w, pw, ix, g.grid_w), height, width);
            if (!t.valid) {
              continue;
            }
            gin[t.p1] += gbin * t.w1 / g.count;
            gin[t.p2] += gbin * t.w2 / g.count;
            gin[t.p3] += gbin * t.w3 / g.count;
            gin[t.p4] += gbin * t.w4 / g.count;
          }
        }
      }
    }
  }
}

// grads[l] are acc_t buffers shaped like the level's features.
template <typename scalar_t>
void BackwardKernel(const std::vector<LevelView<scalar_t>>& levels_view,
                    const std::vector<at::opmath_type<scalar_t>*>& grads, const int64_t* levels,
                    const scalar_t* rois, int64_t num_rois, int64_t batch, int64_t channels,
                    int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                    const at::Tensor& grad_out) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* go = grad_out.data_ptr<scalar_t>();
  const int64_t sn = grad_out.stride(0), sc = grad_out.stride(1), sh = grad_out.stride(2),
                sw = grad_out.stride(3);
  const int64_t num_levels = static_cast<int64_t>(levels_view.size());
  at::parallel_for(0, channels, 1, [&](int64_t c_begin, int64_t c_end) {
    std::vector<Sample<acc_t>> samples;
    Footprint fp;
    for (int64_t n = 0; n < num_rois; ++n) {
      const int64_t l = LevelOf(levels, n, num_levels);
      if (l < 0) {
        continue;
      }
      const LevelView<scalar_t>& lv = levels_view[l];
      const auto g = ComputeRoiGeometry<int64_t>(rois + n * 5, static_cast<acc_t>(lv.scale),
                                                 pooled_h, pooled_w, sampling_ratio, aligned);
      TORCH_CHECK(g.batch >= 0 && g.batch < batch, "mrcnn::roi_align backward: roi ", n,
                  " has batch index ", static_cast<double>(rois[n * 5]), " outside [0, ", batch,
                  ")");
      CheckSampleCount(g, pooled_h, pooled_w, n);
      const int64_t plane = lv.height * lv.width;
      if (plane == 0) {
        continue;
      }
      acc_t* batch_base = grads[l] + g.batch * channels * plane;
      if (!StoreSamples(pooled_h, pooled_w, g.grid_h, g.grid_w)) {
        BackwardRoiOnTheFly(g, batch_base, lv.height, lv.width, c_begin, c_end, pooled_h, pooled_w,
                            go + n * sn, sc, sh, sw);
        continue;
      }
      ComputeSamples(g, lv.height, lv.width, pooled_h, pooled_w, samples);
      const int64_t per_bin = g.grid_h * g.grid_w;
      ComputeFootprint(samples, lv.width, fp);
      for (int64_t c = c_begin; c < std::min(c_begin + kPrefetchChannels, c_end); ++c) {
        PrefetchFootprint(batch_base + c * plane, lv.width, fp, true);
      }
      // Channel blocks share each sample's taps (as in the forward pass); channels
      // past the end of a partial block get a zero gradient so they add nothing.
      constexpr int64_t kChannelBlock = 4;
      for (int64_t c0 = c_begin; c0 < c_end; c0 += kChannelBlock) {
        const int64_t cb = std::min(kChannelBlock, c_end - c0);
        for (int64_t c = c0 + kPrefetchChannels; c < std::min(c0 + kPrefetchChannels + cb, c_end);
             ++c) {
          PrefetchFootprint(batch_base + c * plane, lv.width, fp, true);
        }
        acc_t* gin[kChannelBlock];
        for (int64_t j = 0; j < kChannelBlock; ++j) {
          gin[j] = batch_base + (c0 + std::min(j, cb - 1)) * plane;
        }
        const Sample<acc_t>* s = samples.data();
        for (int64_t ph = 0; ph < pooled_h; ++ph) {
          for (int64_t pw = 0; pw < pooled_w; ++pw) {
            acc_t gbin[kChannelBlock];
            for (int64_t j = 0; j < kChannelBlock; ++j) {
              gbin[j] = j < cb ? static_cast<acc_t>(go[n * sn + (c0 + j) * sc + ph * sh + pw * sw])
                               : acc_t(0);
            }
            for (int64_t k = 0; k < per_bin; ++k, ++s) {
              const Sample<acc_t> t = *s;
              // Out-of-map samples receive nothing (as in torchvision), so a non-finite
              // gradient does not leak into position 0.
              if (!t.valid) {
                continue;
              }
              for (int64_t j = 0; j < kChannelBlock; ++j) {
                gin[j][t.p1] += gbin[j] * t.w1 / g.count;
                gin[j][t.p2] += gbin[j] * t.w2 / g.count;
                gin[j][t.p3] += gbin[j] * t.w3 / g.count;
                gin[j][t.p4] += gbin[j] * t.w4 / g.count;
              }
            }
          }
        }
      }
    }
  });
}

at::Tensor MultiLevelForwardCpu(const std::vector<at::Tensor>& features_in,
                                const at::Tensor& rois_in, const at::Tensor& levels_in,
                                const std::vector<double>& scales, int64_t pooled_h,
                                int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                                const char* op) {
  CheckRois(rois_in, op);
  CheckPooling(pooled_h, pooled_w, sampling_ratio, op);
  CheckLevelFeatures(features_in, rois_in, op);
  TORCH_CHECK(scales.size() == features_in.size(), op, ": got ", scales.size(), " scales for ",
              features_in.size(), " feature levels");
  // Channels-last maps (every level) are read in place by the channel-vector kernel.
  const bool channels_last =
      sampling_ratio > 0 && StoreSamples(pooled_h, pooled_w, sampling_ratio, sampling_ratio) &&
      std::all_of(features_in.begin(), features_in.end(), [](const at::Tensor& f) {
        return f.size(1) > 1 && f.is_contiguous(at::MemoryFormat::ChannelsLast) &&
               !f.is_contiguous();
      });
  std::vector<at::Tensor> features;
  for (const auto& f : features_in) {
    features.push_back(channels_last ? f : f.contiguous());
  }
  const at::Tensor rois = rois_in.contiguous();
  const int64_t num_rois = rois.size(0);
  const int64_t batch = features[0].size(0), channels = features[0].size(1);
  // ForwardKernel writes every element (zeros where a roi samples nothing).
  at::Tensor out = at::empty({num_rois, channels, pooled_h, pooled_w}, features[0].options());
  if (out.numel() == 0) {
    return out;
  }
  at::Tensor levels;
  if (levels_in.defined()) {
    TORCH_CHECK(levels_in.dim() == 1 && levels_in.size(0) == num_rois, op,
                ": levels must hold one entry per roi");
    levels = levels_in.to(at::kLong).contiguous();
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, rois.scalar_type(), "roi_align_cpu", [&] {
        std::vector<LevelView<scalar_t>> views;
        for (size_t l = 0; l < features.size(); ++l) {
          views.push_back({features[l].data_ptr<scalar_t>(), features[l].size(2),
                           features[l].size(3), scales[l]});
        }
        const int64_t* level_of = levels.defined() ? levels.data_ptr<int64_t>() : nullptr;
        if (channels_last) {
          ForwardKernelChannelsLast<scalar_t>(views, level_of, rois.data_ptr<scalar_t>(), num_rois,
                                              batch, channels, pooled_h, pooled_w, sampling_ratio,
                                              aligned, out.data_ptr<scalar_t>());
        } else {
          ForwardKernel<scalar_t>(views, level_of, rois.data_ptr<scalar_t>(), num_rois, batch,
                                  channels, pooled_h, pooled_w, sampling_ratio, aligned,
                                  out.data_ptr<scalar_t>());
        }
      });
  return out;
}

std::vector<at::Tensor> MultiLevelBackwardCpu(const at::Tensor& grad, const at::Tensor& rois_in,
                                              const at::Tensor& levels_in,
                                              const std::vector<double>& scales,
                                              at::IntArrayRef feature_shapes, int64_t pooled_h,
                                              int64_t pooled_w, int64_t sampling_ratio,
                                              bool aligned, bool channels_last, const char* op) {
  CheckRois(rois_in, op);
  CheckPooling(pooled_h, pooled_w, sampling_ratio, op);
  const int64_t num_levels = static_cast<int64_t>(scales.size());
  TORCH_CHECK(static_cast<int64_t>(feature_shapes.size()) == 4 * num_levels, op,
              ": feature_shapes must hold B,C,H,W for each of the ", num_levels, " levels");
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == rois_in.size(0), op,
              ": grad must be K×C×pooled_h×pooled_w");
  const at::Tensor rois = rois_in.contiguous();
  const int64_t num_rois = rois.size(0);
  const int64_t batch = feature_shapes[0], channels = feature_shapes[1];
  at::Tensor levels;
  if (levels_in.defined()) {
    levels = levels_in.to(at::kLong).contiguous();
  }
  const auto acc_dtype = at::toOpMathType(grad.scalar_type());
  std::vector<at::Tensor> grads;
  for (int64_t l = 0; l < num_levels; ++l) {
    grads.push_back(at::zeros(feature_shapes.slice(4 * l, 4), grad.options().dtype(acc_dtype)));
  }
  if (grad.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, grad.scalar_type(), "roi_align_cpu", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          std::vector<LevelView<scalar_t>> views;
          std::vector<acc_t*> grad_ptrs;
          for (int64_t l = 0; l < num_levels; ++l) {
            views.push_back(
                {nullptr, feature_shapes[4 * l + 2], feature_shapes[4 * l + 3], scales[l]});
            grad_ptrs.push_back(grads[l].data_ptr<acc_t>());
          }
          const at::Tensor rois_t = rois.to(grad.scalar_type());
          BackwardKernel<scalar_t>(views, grad_ptrs,
                                   levels.defined() ? levels.data_ptr<int64_t>() : nullptr,
                                   rois_t.data_ptr<scalar_t>(), num_rois, batch, channels, pooled_h,
                                   pooled_w, sampling_ratio, aligned, grad);
        });
  }
  // Accumulated planar; the layout asked for is a conversion here (the CUDA kernel writes it).
  for (auto& g : grads) {
    g = g.to(grad.scalar_type(), false, false,
             channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  }
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  using Ops = RoiAlignOps<&MultiLevelForwardCpu, &MultiLevelBackwardCpu>;
  m.impl("roi_align", &Ops::Forward);
  m.impl("_roi_align_backward", &Ops::Backward);
  m.impl("_multi_level_roi_align", &Ops::MultiLevelForward);
  m.impl("_multi_level_roi_align_backward", &Ops::MultiLevelBackward);
}

}  // namespace mrcnn::kernels
