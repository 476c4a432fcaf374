// The meta-architecture registry (MODEL.META_ARCHITECTURE) and BuildModel.
#include <torch/torch.h>

#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {

// Each in its own room of meta_arch/.
void RegisterGeneralizedRcnn(Registry<MetaArchitecture>& registry);  // generalized_rcnn.cpp
void RegisterRetinaNet(Registry<MetaArchitecture>& registry);        // retinanet.cpp

Registry<MetaArchitecture>& MetaArchRegistry() {
  static Registry<MetaArchitecture> registry("meta-architecture", "MODEL.META_ARCHITECTURE");
  static bool populated = [] {
    RegisterGeneralizedRcnn(registry);
    RegisterRetinaNet(registry);
    return true;
  }();
  (void)populated;
  return registry;
}

std::shared_ptr<MetaArchitecture> BuildModel(const ModelConfig& config) {
  return MetaArchRegistry().Create(config.meta_architecture, config);
}

}  // namespace mrcnn::model
