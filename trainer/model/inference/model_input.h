#pragma once
// The images a forward pass of inference takes, made from the caller's 8-bit RGB pixels, with
// the sizes the outputs are scaled back to. Shared by the untiled path (inference.cpp), tiled
// inference (tiled_prediction.cpp) and the training engine's tiled evaluation.
//
// Under Detectron2's convention an image is resized here as DefaultPredictor resizes it: to
// ResizeShortestEdge(INPUT.MIN_SIZE_TEST, INPUT.MAX_SIZE_TEST)'s size with Pillow's bilinear on
// the uint8 pixels (trainer/data/pil_bilinear_resize.h), on the host before the upload; the
// model then takes it unresized and its Postprocess scales the outputs back to the original
// size (detector_postprocess). Under torchvision's convention the image goes as it is and the
// model's Transform resizes the float image (GeneralizedRCNNTransform).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <vector>

#include "trainer/model/config.h"

namespace mrcnn::model {

struct ModelInputs {
  std::vector<at::Tensor> images;                    // 3 x h x w float in [0, 1], on the device
  std::vector<std::array<int64_t, 2>> output_sizes;  // per image its original (height, width)
};

// RGB bytes (H x W x 3, any row stride through `hwc`) as the model's 3 x H x W float input
// in [0, 1] on `device`.
at::Tensor ModelInput(const at::Tensor& hwc, const c10::Device& device);

// Appends the image `hwc` (H x W x 3 uint8 RGB on the CPU, any row stride: a tile may be a
// view of a larger image) to `inputs`, resized as the config's convention wants (above), with
// H x W as its output size.
void AddModelInput(const ModelConfig& config, const at::Tensor& hwc, const c10::Device& device,
                   ModelInputs& inputs);

}  // namespace mrcnn::model
