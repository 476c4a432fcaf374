#pragma once
// INPUT.CROP.* of the training config (ENABLED, TYPE, SIZE: Detectron2's keys; and our
// MIN_AREA_FRACTION) read and checked into the data pipeline's CropSpec. Checked when the
// job is resolved, before any data is read, so that a bad crop stops the job at once.
// Torch-free.
#include "trainer/data/crop_spec.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {

// Throws common::ConfigError ("config", the key, what is wrong and the fix) for an
// unknown TYPE, a SIZE that is not two positive numbers, a relative SIZE outside (0, 1],
// an absolute SIZE that is not whole pixels, an absolute_range SIZE with min > max, or a
// MIN_AREA_FRACTION outside [0, 1]. The keys are checked even while ENABLED is false.
data::CropSpec InputCropOf(const TrainConfig& config);

}  // namespace mrcnn::engine
