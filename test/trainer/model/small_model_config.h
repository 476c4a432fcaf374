#pragma once
// The small Mask R-CNN the model and engine tests build, so they stay fast on a CPU:
// ResNet-18, 3 classes, narrow FPN, box and mask heads.
#include "trainer/model/config.h"

namespace mrcnn::test {

inline model::ModelConfig SmallModelConfig() {
  model::ModelConfig c;
  c.backbone = "resnet18";
  c.num_classes = 3;
  c.box_fc_dim = 32;
  c.mask_conv_dim = 16;
  c.fpn_out_channels = 32;
  return c;
}

}  // namespace mrcnn::test
