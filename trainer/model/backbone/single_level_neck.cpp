// The neck of Detectron2's build_resnet_backbone (C4, DC5): none. The body's one returned
// stage is the only level the RPN and the ROI heads see.
#include <torch/torch.h>

#include "trainer/model/backbone/resnet.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace {

class SingleLevelNeck : public Neck {
 public:
  explicit SingleLevelNeck(int64_t channels) : channels_(channels) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& inputs) override {
    TORCH_CHECK(inputs.size() == 1, "MODEL.NECK none: the body must return one map, got ",
                inputs.size());
    return inputs;
  }
  int64_t OutChannels() const override { return channels_; }
  int64_t NumRpnOnlyLevels() const override { return 0; }

 private:
  int64_t channels_;
};

}  // namespace

void RegisterSingleLevelNeck(Registry<Neck>& registry) {
  registry.Add("none", [](const ModelConfig& c) {
    const std::vector<int64_t> channels = ResNetChannels(c);
    TORCH_CHECK(channels.size() == 1,
                "MODEL.RESNETS.OUT_FEATURES: the neck none takes one stage, got ", channels.size());
    return std::make_shared<SingleLevelNeck>(channels.front());
  });
}

}  // namespace mrcnn::model
