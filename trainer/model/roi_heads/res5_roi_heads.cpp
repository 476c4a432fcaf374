// Res5ROIHeads (MODEL.ROI_HEADS.NAME, Detectron2's C4 heads): StandardROIHeads whose box head is
// ResNet's res5 stage over the pooled res4 features (ROI_BOX_HEAD.NAME res5, registered in
// res5_head.cpp) and whose mask predictor reads that same trunk: its parameters stay the box
// head's alone, so no mask_head child is registered.
#include <torch/torch.h>

#include "trainer/model/parts.h"
#include "trainer/model/roi_heads/standard_roi_heads.h"

namespace mrcnn::model {
namespace {

class Res5RoiHeads : public StandardRoiHeads {
 public:
  Res5RoiHeads(const ModelConfig& config, SharedContext context)
      : StandardRoiHeads(config, std::move(context), BoxHeadOnly{}) {
    auto res5 = std::dynamic_pointer_cast<Res5Head>(box_head_);
    if (res5 == nullptr) {
      throw std::runtime_error(
          "model config: MODEL.ROI_HEADS.NAME Res5ROIHeads needs "
          "MODEL.ROI_BOX_HEAD.NAME res5 (ResNet's res5 stage), got '" +
          config_.box_head + "'");
    }
    if (config_.mask_on)
      RegisterMaskHead(MaskHeadOnRes5(res5), /*register_head=*/false);
    if (config_.keypoint_on)
      RegisterKeypointHead();
  }
};

}  // namespace

void RegisterRes5RoiHeads(Registry<RoiHeads, SharedContext>& registry) {
  registry.Add("Res5ROIHeads", [](const ModelConfig& c, SharedContext context) {
    return std::make_shared<Res5RoiHeads>(c, std::move(context));
  });
}

}  // namespace mrcnn::model
