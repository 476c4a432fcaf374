#pragma once
// The switches a meta-architecture's caller sets between forward passes, shared with the parts
// it built (proposal generator, ROI heads): one object, owned by the meta-architecture, that
// the parts read and never write.
#include <ATen/core/Generator.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/model/structures.h"

namespace mrcnn::model {

struct ForwardContext {
  DetectionSettings settings;
  // Generators for the RPN and RoI-head samplers, one per image of the next training batch
  // (image i draws from [i]); empty: the global generator. The trainer seeds them per image so
  // the sampled anchors and RoIs of an image do not depend on which other images share its
  // batch, which makes W processes with batch B/W match one with batch B.
  std::vector<at::Generator> sampling_generators;
  // How many RoIs the mask head trains on per image. Fixed (true): as many as the sampler can
  // make positive, padding included, so no size depends on the device's values and the step
  // never waits for the GPU; exact (false): the image's positives, found with a host read,
  // which costs nothing on a CPU, where the padded rows would be real work. Default
  // (nullopt): fixed on CUDA, exact elsewhere. Same losses and gradients either way.
  std::optional<bool> fixed_mask_rows;
  // Called with nullptr when forward() starts and then at the end of each stage with the
  // stage's name (transform, backbone, fpn, rpn, roi_maps, box_pool, box_head, box_select,
  // mask_pool, mask_head, keypoint_head, paste); benchmarks time the gaps between calls.
  std::function<void(const char*)> phase_hook;

  void Phase(const char* name) const {
    if (phase_hook)
      phase_hook(name);
  }
  std::optional<at::Generator> SamplingGenerator(size_t image) const {
    if (sampling_generators.empty())
      return std::nullopt;
    if (image >= sampling_generators.size())
      throw std::logic_error("model: " + std::to_string(sampling_generators.size()) +
                             " sampling generators for a batch with more images");
    return sampling_generators[image];
  }
};

}  // namespace mrcnn::model
