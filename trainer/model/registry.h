#pragma once
// Name -> factory registries for the interchangeable parts of the model, so a config
// can swap a backbone or a head without touching the others. The built-in parts register
// in their rooms (backbone/resnet.cpp, backbone/fpn.cpp, rpn/rpn_head.cpp,
// roi_heads/box_head.cpp, roi_heads/mask_head.cpp); a new part registers with
// `XRegistry().Add("name", factory)` before the model is built (e.g. from a static initialiser in
// its own TU).
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/model/config.h"

namespace mrcnn::model {

template <typename Product>
class Registry {
 public:
  using Factory = std::function<std::shared_ptr<Product>(const ModelConfig&)>;

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
  // Throws naming the config key and the registered names when `name` is unknown.
  std::shared_ptr<Product> Create(const std::string& name, const ModelConfig& config) const {
    auto it = factories_.find(name);
    if (it == factories_.end()) {
      std::string known;
      for (const auto& n : Names())
        known += (known.empty() ? "" : ", ") + n;
      throw std::runtime_error("config key " + config_key_ + ": unknown " + kind_ + " '" + name +
                               "' (registered: " + known + ")");
    }
    return it->second(config);
  }

 private:
  std::string kind_;
  std::string config_key_;
  std::map<std::string, Factory> factories_;
};

class BackboneBody;
class Neck;
class RpnHead;
class BoxHead;
class MaskHead;

// Each returns the process-wide registry, with the built-in parts already added.
Registry<BackboneBody>& BackboneRegistry();  // MODEL.BACKBONE.NAME: resnet18, resnet50, resnet101
Registry<Neck>& NeckRegistry();              // MODEL.NECK.NAME: fpn
Registry<RpnHead>& RpnHeadRegistry();        // MODEL.RPN.HEAD_NAME: standard
Registry<BoxHead>& BoxHeadRegistry();        // MODEL.ROI_BOX_HEAD.NAME: two_mlp
Registry<MaskHead>& MaskHeadRegistry();      // MODEL.ROI_MASK_HEAD.NAME: four_conv

}  // namespace mrcnn::model
