// libFuzzer target over Detectron2 and Caffe2 checkpoints as the trainer reads them
// (trainer/model/weights/): the pickle machine, torch.save's zip and legacy formats, numpy
// arrays, the checkpoint layouts, then the name mapping and re-layout of what was read.
// std::runtime_error is the expected rejection; any other exception, a crash, a sanitizer
// report, or a tensor whose bytes disagree with its dtype and shape is a finding.
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "trainer/model/weights/detectron2_checkpoint.h"
#include "trainer/model/weights/weight_name_mapping.h"

namespace {

void CheckTensor(const mrcnn::model::weights::RawTensor& tensor) {
  const int64_t count = mrcnn::model::weights::CheckedNumElements(tensor.shape);
  if (tensor.bytes.size() != static_cast<size_t>(count) * ElementSize(tensor.dtype))
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace weights = mrcnn::model::weights;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    weights::Detectron2Checkpoint checkpoint =
        weights::ReadCheckpointBytes(bytes, "model_final.pth");
    for (const auto& [name, tensor] : checkpoint.tensors)
      CheckTensor(tensor);
    const weights::WeightMapping mapping =
        weights::MapCheckpointToModel(std::move(checkpoint), nullptr);
    for (const auto& [name, mapped] : mapping.tensors) {
      if (name.empty())
        std::abort();
      CheckTensor(mapped.tensor);
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
