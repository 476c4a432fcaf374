// The mask head (torchvision MaskRCNNHeads: four 3x3 convs; Detectron2's
// MaskRCNNConvUpsampleHead: NUM_CONV of them, each with the head's norm) and the mask predictor
// (MaskRCNNPredictor), with its per-label GEMM path for CPU inference.
#include <torch/torch.h>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/conv_layers.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

namespace {

// 3x3 conv (+ norm) + ReLU layers, children named 0..N-1 as torchvision's MaskRCNNHeads
// (Sequential(conv, ReLU); a conv's norm is inside it, "I.0.norm").
class ConvMaskHead : public MaskHead {
 public:
  ConvMaskHead(int64_t in_channels, int64_t dim, int num_conv, const std::string& norm,
               double frozen_bn_eps)
      : out_channels_(num_conv > 0 ? dim : in_channels) {
    int64_t in = in_channels;
    for (int i = 0; i < num_conv; ++i) {
      NormedConv conv = MakeNormedConv(in, dim, 3, 1, 1, norm, frozen_bn_eps);
      KaimingNormalFanOut(conv.conv);
      register_module(std::to_string(i), nn::Sequential(conv.conv, nn::ReLU()));
      convs_.push_back(conv.fast);
      in = dim;
    }
  }
  at::Tensor Forward(const at::Tensor& pooled) override {
    at::Tensor x = pooled;
    for (auto& conv : convs_)
      x = conv.Forward(x, /*relu=*/true);
    return x;
  }
  int64_t OutChannels() const override { return out_channels_; }

 private:
  int64_t out_channels_;
  std::vector<FastConv> convs_;
};

}  // namespace

MaskRcnnPredictor::MaskRcnnPredictor(int64_t in_channels, int64_t dim_reduced,
                                     int64_t mask_classes) {
  conv5_mask_ = register_module(
      "conv5_mask",
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in_channels, dim_reduced, 2).stride(2)));
  mask_fcn_logits_ = register_module(
      "mask_fcn_logits", MakeConv2d(dim_reduced, mask_classes, 1, 1, 0, true));
  nn::init::kaiming_normal_(conv5_mask_->weight, 0.0, torch::kFanOut, torch::kReLU);
  nn::init::zeros_(conv5_mask_->bias);
  KaimingNormalFanOut(mask_fcn_logits_);
}

at::Tensor MaskRcnnPredictor::Forward(const at::Tensor& x) {
  return mask_fcn_logits_->forward(conv5_mask_->forward(x).relu_());
}

at::Tensor MaskRcnnPredictor::LabelLogits(const at::Tensor& x, const at::Tensor& labels_in) {
  // A class-agnostic predictor's one channel serves every label.
  const at::Tensor labels =
      mask_fcn_logits_->weight.size(0) == 1 ? torch::zeros_like(labels_in) : labels_in;
  const bool bf16 = CpuBf16Path(x);
  if (bf16 && x.scalar_type() != at::kBFloat16)
    return LabelLogits(x.to(at::kBFloat16), labels_in);
  const std::vector<at::Tensor> params =
      bf16 ? bf16_.Of({conv5_mask_->weight, conv5_mask_->bias, mask_fcn_logits_->weight,
                       mask_fcn_logits_->bias})
           : std::vector<at::Tensor>{conv5_mask_->weight, conv5_mask_->bias,
                                     mask_fcn_logits_->weight, mask_fcn_logits_->bias};
  const at::Tensor& deconv_w = params[0];  // C×K×2×2
  if (!bf16 && (!CpuInferenceFastPath(x) || deconv_w.scalar_type() != at::kFloat)) {
    at::Tensor idx = torch::arange(x.size(0), labels.options());
    return Forward(x).index({idx, labels});
  }
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t k = deconv_w.size(1);
  const at::Tensor logit_w = params[2].flatten(1).index_select(0, labels);
  const at::Tensor logit_b = params[3].index_select(0, labels);
  if (bf16) {
    // The same deconvolution as one 1×1 convolution with 4K output channels in (a, b, k)
    // order, bias and ReLU fused by oneDNN: channels-last, its output is (i, j, a, b, k) per
    // RoI, so each RoI's label logits are one matrix-vector product over k. On the 2-core
    // AMX VM: ~10 ms for 100 RoIs against 51 ms for the bmm, its bias and its ReLU (issue 54).
    const at::Tensor weight = deconv_w.permute({2, 3, 1, 0})
                                  .reshape({4 * k, c, 1, 1})
                                  .contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor bias = params[1].repeat({4});
    const at::Tensor z =
        Bf16Conv1x1Relu(x.contiguous(at::MemoryFormat::ChannelsLast), weight, bias);
    const at::Tensor per_roi = z.permute({0, 2, 3, 1}).reshape({n, h * w * 4, k});
    at::Tensor out = at::baddbmm(logit_b.view({n, 1, 1}), per_roi, logit_w.unsqueeze(2));
    // (i, j, a, b) -> (i, a, j, b): the 2H×2W map.
    return out.view({n, h, w, 2, 2}).permute({0, 1, 3, 2, 4}).reshape({n, 2 * h, 2 * w});
  }
  // Deconvolution with kernel 2 and stride 2 has no overlap: output pixel (2i+a, 2j+b)
  // of channel k is Σ_c w[c,k,a,b]·x[c,i,j]. Rows (k, a, b) of one GEMM give, per RoI,
  // a K × (2·2·H·W) matrix: ReLU(deconv) in (a, b, i, j) order, ready for the 1×1 logits.
  // bmm with the weight broadcast writes (k, a, b) × (i, j) per RoI in place; matmul
  // would fold the RoIs into one GEMM and transpose its result with an extra copy.
  const at::Tensor weight = deconv_w.permute({1, 2, 3, 0}).reshape({4 * k, c});
  at::Tensor z = at::bmm(weight.unsqueeze(0).expand({n, 4 * k, c}), x.reshape({n, c, h * w}))
                     .view({n, k, 4 * h * w});
  z.add_(params[1].view({1, k, 1})).relu_();
  at::Tensor out = at::baddbmm(logit_b.view({n, 1, 1}), logit_w.unsqueeze(1), z);
  // (a, b, i, j) -> (i, a, j, b): the 2H×2W map.
  return out.view({n, 2, 2, h, w}).permute({0, 3, 1, 4, 2}).reshape({n, 2 * h, 2 * w});
}

Registry<MaskHead>& MaskHeadRegistry() {
  static Registry<MaskHead> registry("mask head", "MODEL.ROI_MASK_HEAD.NAME");
  static bool populated = [] {
    registry.Add("four_conv", [](const ModelConfig& c) {
      return std::make_shared<ConvMaskHead>(c.FeatureChannels(), c.mask_conv_dim, c.mask_num_conv,
                                            c.mask_head_norm, c.frozen_bn_eps);
    });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
