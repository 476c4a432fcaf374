#pragma once
// ResNet's residual blocks and a stage of them, shared by the backbone bodies
// (backbone/resnet.cpp) and the C4 ROI heads' res5 (roi_heads/res5_head.cpp). Children are
// named as torchvision's (conv1, bn1, ..., downsample.0/.1), so state_dict keys match
// torchvision's for its ResNets and trainer/model/weights/ maps Detectron2's onto them.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"

namespace mrcnn::model {

class NormLayer;

// A block's geometry. Bottleneck: 1x1 in->width, 3x3 width->width (groups, dilation),
// 1x1 width->out; the stride sits on the 1x1 (Detectron2's MSRA weights, stride_in_1x1) or
// on the 3x3 (torchvision's "ResNet v1.5", Detectron2's FAIR ResNeXt weights). Basic
// (ResNet-18): two 3x3 convs in->out, the stride on the first. A projection shortcut
// (downsample) when the stride or the channels change.
// Deformable (bottleneck only, Detectron2's DeformBottleneckBlock): the 3x3 is a deformable
// convolution whose offsets (and, modulated, the mask) come from conv2_offset, a 3x3 with a bias
// over conv1's output at the 3x3's stride and dilation, zero-initialised.
struct ResidualBlockShape {
  bool bottleneck = true;
  int64_t in = 64, width = 64, out = 256, stride = 1;
  bool stride_in_1x1 = false;
  int64_t groups = 1, dilation = 1;
  bool deform = false, deform_modulated = false;
  int64_t deform_groups = 1;
  std::string norm;  // the block's norm name; "" = the config's (MODEL.RESNETS/BACKBONE.NORM)
};

// The config's norm (MODEL.BACKBONE.NORM / MODEL.RESNETS.NORM) by name (parts.h MakeNormByName).
std::shared_ptr<NormLayer> MakeNorm(const ModelConfig& config, int64_t channels);

// The norm of Detectron2's body at stage `index` (1 = the stem, 2..5 = res2..res5): a BN or
// SyncBN stage that MODEL.BACKBONE.FREEZE_AT freezes is FrozenBN, as Detectron2's freeze()
// converts it (GroupNorm stays GroupNorm: only its affine terms stop training).
std::string Detectron2BodyNorm(const ModelConfig& config, int index);

class ResidualBlock : public torch::nn::Module {
 public:
  ResidualBlock(const ModelConfig& config, const ResidualBlockShape& shape);
  // x by value: moved in (x = block->Forward(std::move(x))), its memory can take the block's
  // output in bf16 mode (FastConv::ForwardAdd) instead of a copy of it.
  at::Tensor Forward(at::Tensor x);

 private:
  at::Tensor DeformableConv2(const at::Tensor& x);  // relu(bn2(deform_conv(x, offsets)))

  bool bottleneck_;
  ResidualBlockShape shape_;
  torch::nn::Conv2d conv2_offset_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  FastConv conv1_fast_, conv2_fast_, conv3_fast_, down_fast_;  // each with its norm
  std::shared_ptr<NormLayer> bn1_, bn2_, bn3_, down_norm_;
  torch::nn::ModuleList downsample_{nullptr};
};

// One of Detectron2's stages res2..res5 (index 2..5) of a bottleneck ResNet built from
// MODEL.RESNETS: `blocks` blocks, width = NUM_GROUPS * WIDTH_PER_GROUP * 2^(index-2), out =
// RES2_OUT_CHANNELS * 2^(index-2), the first block strided by 2 (res2: 1; res5 with
// RES5_DILATION 2: 1, its 3x3s dilated). Blocks are pushed onto `list` as children 0..n-1
// and returned in order.
// `norm`: the blocks' norm name ("" = the config's).
std::vector<std::shared_ptr<ResidualBlock>> Detectron2Stage(const ModelConfig& config, int index,
                                                            int64_t blocks, int64_t in_channels,
                                                            torch::nn::ModuleList list,
                                                            const std::string& norm = "");

// Output channels of Detectron2's stage res<index> for this config.
int64_t Detectron2StageChannels(const ModelConfig& config, int index);

// Blocks per stage res2..res5 for MODEL.RESNETS.DEPTH 50, 101 or 152.
std::vector<int64_t> Detectron2StageBlocks(int depth);

}  // namespace mrcnn::model
