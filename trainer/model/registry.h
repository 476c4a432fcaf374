#pragma once
// Name -> factory registries for every choice Detectron2 makes by config: the
// meta-architecture (MODEL.META_ARCHITECTURE), the proposal generator
// (MODEL.PROPOSAL_GENERATOR.NAME), the ROI heads (MODEL.ROI_HEADS.NAME) and the parts inside
// them (backbone, neck, RPN head, box head, mask head). Each registry is defined in the room
// of its default entry, with the built-in entries added when it is first used (so no static
// initialisation order matters); a new entry is one `XRegistry().Add("name", factory)` line
// there (trainer/model/README.md, "Adding to the model").
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/model/config.h"

namespace mrcnn::model {

// Args: what a factory needs besides the config (the ROI heads and proposal generators get
// their meta-architecture's ForwardContext).
template <typename Product, typename... Args>
class Registry {
 public:
  using Factory = std::function<std::shared_ptr<Product>(const ModelConfig&, Args...)>;

  explicit Registry(std::string kind, std::string config_key)
      : kind_(std::move(kind)), config_key_(std::move(config_key)) {}

  // Throws when the name is taken: two parts silently sharing a name is always a bug.
  void Add(const std::string& name, Factory factory) {
    if (!factories_.emplace(name, std::move(factory)).second) {
      throw std::logic_error("model registry: " + kind_ + " '" + name + "' registered twice");
    }
  }
  bool Contains(const std::string& name) const { return factories_.count(name) != 0; }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : factories_)
      names.push_back(entry.first);
    return names;
  }
  // Throws std::runtime_error naming `source`, the config key and the registered names when
  // `name` is unknown (ModelConfig::Validate calls it, so a config fails before any module
  // is built).
  void Check(const std::string& name, const std::string& source) const {
    if (Contains(name))
      return;
    std::string known;
    for (const auto& n : Names())
      known += (known.empty() ? "" : ", ") + n;
    throw std::runtime_error(source + ": config key " + config_key_ + ": unknown " + kind_ + " '" +
                             name + "' (registered: " + known + ")");
  }
  std::shared_ptr<Product> Create(const std::string& name, const ModelConfig& config,
                                  Args... args) const {
    Check(name, "model config");
    return factories_.at(name)(config, std::forward<Args>(args)...);
  }

 private:
  std::string kind_;
  std::string config_key_;
  std::map<std::string, Factory> factories_;
};

class MetaArchitecture;
class ProposalGenerator;
class RoiHeads;
class BackboneBody;
class Neck;
class RpnHead;
class BoxHead;
class MaskHead;
class KeypointHead;
struct ForwardContext;
using SharedContext = std::shared_ptr<const ForwardContext>;

// Each returns the process-wide registry, with the built-in entries already added.
// MODEL.META_ARCHITECTURE: GeneralizedRCNN, RetinaNet (meta_arch/build_model.cpp).
Registry<MetaArchitecture>& MetaArchRegistry();
// MODEL.PROPOSAL_GENERATOR.NAME: RPN (proposal_generator/rpn.cpp).
Registry<ProposalGenerator, SharedContext>& ProposalGeneratorRegistry();
// MODEL.ROI_HEADS.NAME: StandardROIHeads, Res5ROIHeads, CascadeROIHeads
// (roi_heads/standard_roi_heads.cpp).
Registry<RoiHeads, SharedContext>& RoiHeadsRegistry();
Registry<BackboneBody>& BackboneRegistry();  // MODEL.BACKBONE.NAME: resnet18, resnet50, resnet101
Registry<Neck>& NeckRegistry();              // MODEL.NECK.NAME: fpn
Registry<RpnHead>& RpnHeadRegistry();        // MODEL.RPN.HEAD_NAME: standard
Registry<BoxHead>& BoxHeadRegistry();        // MODEL.ROI_BOX_HEAD.NAME: two_mlp, conv_fc, res5
Registry<MaskHead>& MaskHeadRegistry();      // MODEL.ROI_MASK_HEAD.NAME: four_conv
// MODEL.ROI_KEYPOINT_HEAD.NAME: KRCNNConvDeconvUpsampleHead (roi_heads/keypoint_head.cpp).
Registry<KeypointHead>& KeypointHeadRegistry();

}  // namespace mrcnn::model
