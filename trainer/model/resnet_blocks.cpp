#include "trainer/model/resnet_blocks.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "kernels/ops.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

nn::Conv2d MakeConv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups,
                    int64_t dilation) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k)
                        .stride(stride)
                        .padding(k == 3 ? dilation : 0)
                        .dilation(dilation)
                        .groups(groups)
                        .bias(false));
}

}  // namespace

std::shared_ptr<NormLayer> MakeNorm(const ModelConfig& config, int64_t channels) {
  return MakeNormByName(config.norm, channels, config.frozen_bn_eps);
}

std::string Detectron2BodyNorm(const ModelConfig& config, int index) {
  const int freeze_at = 5 - config.trainable_layers;
  const bool batch_norm = config.norm == "BN" || config.norm == "SyncBN";
  return batch_norm && index <= freeze_at ? "FrozenBN" : config.norm;
}

ResidualBlock::ResidualBlock(const ModelConfig& config, const ResidualBlockShape& s)
    : bottleneck_(s.bottleneck), shape_(s) {
  TORCH_CHECK(!s.deform || s.bottleneck, "a deformable block must be a bottleneck");
  const std::string& norm_name = s.norm.empty() ? config.norm : s.norm;
  auto block_norm = [&](int64_t channels) {
    return MakeNormByName(norm_name, channels, config.frozen_bn_eps);
  };
  if (s.bottleneck) {
    const int64_t stride_1x1 = s.stride_in_1x1 ? s.stride : 1;
    const int64_t stride_3x3 = s.stride_in_1x1 ? 1 : s.stride;
    conv1_ = register_module("conv1", MakeConv(s.in, s.width, 1, stride_1x1, 1, 1));
    bn1_ = register_module("bn1", block_norm(s.width));
    conv2_ =
        register_module("conv2", MakeConv(s.width, s.width, 3, stride_3x3, s.groups, s.dilation));
    bn2_ = register_module("bn2", block_norm(s.width));
    if (s.deform) {
      const int64_t per_group = s.deform_modulated ? 27 : 18;  // (y, x[, mask]) x 3x3 taps
      conv2_offset_ = register_module(
          "conv2_offset", nn::Conv2d(nn::Conv2dOptions(s.width, per_group * s.deform_groups, 3)
                                         .stride(stride_3x3)
                                         .padding(s.dilation)
                                         .dilation(s.dilation)));
      nn::init::zeros_(conv2_offset_->weight);  // training starts as a plain 3x3
      nn::init::zeros_(conv2_offset_->bias);
    }
    conv3_ = register_module("conv3", MakeConv(s.width, s.out, 1, 1, 1, 1));
    bn3_ = register_module("bn3", block_norm(s.out));
  } else {
    conv1_ = register_module("conv1", MakeConv2d(s.in, s.out, 3, s.stride, 1, false));
    bn1_ = register_module("bn1", block_norm(s.out));
    conv2_ = register_module("conv2", MakeConv2d(s.out, s.out, 3, 1, 1, false));
    bn2_ = register_module("bn2", block_norm(s.out));
  }
  if (s.stride != 1 || s.in != s.out) {
    downsample_ = register_module("downsample", nn::ModuleList());
    down_conv_ = MakeConv2d(s.in, s.out, 1, s.stride, 0, false);
    down_norm_ = block_norm(s.out);
    downsample_->push_back(down_conv_);
    downsample_->push_back(down_norm_);
    down_fast_ = FastConv(down_conv_, down_norm_);
  }
  conv1_fast_ = FastConv(conv1_, bn1_);
  conv2_fast_ = FastConv(conv2_, bn2_);
  if (s.bottleneck)
    conv3_fast_ = FastConv(conv3_, bn3_);
  for (auto* conv : {&conv1_, &conv2_, &conv3_, &down_conv_}) {
    if (!conv->is_empty())
      KaimingNormalFanOut(*conv);
  }
}

at::Tensor ResidualBlock::Forward(at::Tensor x) {
  // ReLU and the residual add run in place on fresh temporaries, as torchvision's
  // Bottleneck does (inplace=True): none of them is saved for backward, and every
  // avoided allocation is a full activation map.
  // The last convolution takes the shortcut as its residual (fused in oneDNN in bf16 mode).
  at::Tensor out = conv1_fast_.Forward(x, /*relu=*/true);
  if (shape_.deform)
    out = DeformableConv2(out);
  else if (bottleneck_)
    out = conv2_fast_.Forward(out, /*relu=*/true);
  FastConv& last = bottleneck_ ? conv3_fast_ : conv2_fast_;
  if (downsample_.is_empty())
    return last.ForwardAdd(out, std::move(x), /*relu=*/true);
  return last.ForwardAdd(out, down_fast_.Forward(x), /*relu=*/true);
}

at::Tensor ResidualBlock::DeformableConv2(const at::Tensor& x) {
  // The op computes in float32 (bf16 maps from the CPU fast path come back to float here).
  const at::Tensor input = x.to(at::kFloat);
  at::Tensor offset = conv2_offset_->forward(input);
  std::optional<at::Tensor> mask;
  if (shape_.deform_modulated) {
    // Detectron2's split: the first two thirds are the offsets (in the op's interleaved
    // y, x per tap layout), the last third the mask through a sigmoid.
    std::vector<at::Tensor> parts = offset.chunk(3, 1);
    offset = at::cat({parts[0], parts[1]}, 1);
    mask = parts[2].sigmoid();
  }
  const int64_t stride = shape_.stride_in_1x1 ? 1 : shape_.stride;
  at::Tensor y =
      kernels::DeformConv2d(input, offset, mask, conv2_->weight, std::nullopt, {stride, stride},
                            {shape_.dilation, shape_.dilation}, {shape_.dilation, shape_.dilation},
                            shape_.groups, shape_.deform_groups);
  return bn2_->forward(y).relu_();
}

int64_t Detectron2StageChannels(const ModelConfig& config, int index) {
  return config.resnet_res2_out_channels << (index - 2);
}

std::vector<int64_t> Detectron2StageBlocks(int depth) {
  if (depth == 50)
    return {3, 4, 6, 3};
  if (depth == 101)
    return {3, 4, 23, 3};
  if (depth == 152)
    return {3, 8, 36, 3};
  throw std::runtime_error("MODEL.RESNETS.DEPTH must be 50, 101 or 152, got " +
                           std::to_string(depth));
}

std::vector<std::shared_ptr<ResidualBlock>> Detectron2Stage(const ModelConfig& config, int index,
                                                            int64_t blocks, int64_t in_channels,
                                                            nn::ModuleList list,
                                                            const std::string& norm) {
  const bool dilated = index == 5 && config.resnet_res5_dilation == 2;
  ResidualBlockShape shape;
  shape.in = in_channels;
  shape.width = static_cast<int64_t>(config.resnet_num_groups) * config.resnet_width_per_group
                << (index - 2);
  shape.out = Detectron2StageChannels(config, index);
  shape.stride_in_1x1 = config.resnet_stride_in_1x1;
  shape.groups = config.resnet_num_groups;
  shape.dilation = dilated ? 2 : 1;
  shape.deform = config.detectron2() && config.resnet_deform_on_per_stage.size() == 4 &&
                 config.resnet_deform_on_per_stage[index - 2];
  shape.deform_modulated = config.resnet_deform_modulated;
  shape.deform_groups = config.resnet_deform_num_groups;
  shape.norm = norm;
  std::vector<std::shared_ptr<ResidualBlock>> out;
  for (int64_t b = 0; b < blocks; ++b) {
    shape.stride = (b == 0 && index > 2 && !dilated) ? 2 : 1;
    auto block = std::make_shared<ResidualBlock>(config, shape);
    list->push_back(block);
    out.push_back(block);
    shape.in = shape.out;
  }
  return out;
}

}  // namespace mrcnn::model
