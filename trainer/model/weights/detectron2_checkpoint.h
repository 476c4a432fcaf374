#pragma once
// Reads a checkpoint as Detectron2's DetectionCheckpointer reads it, without Python:
//   - a torch.save file (.pth: zip or legacy format): {"model": state_dict, ...} as
//     Detectron2's trainer saves it (the optimizer, scheduler and iteration are skipped), or
//     a bare state dict;
//   - a pickle of numpy arrays (.pkl): Detectron2's model zoo format {"model": {...},
//     "__author__": ...}, or a Caffe2/Detectron1 file: {"blobs": {...}} or a flat dict, whose
//     "*_momentum" entries (optimizer state) are dropped.
// The format is told from the content, not the file name. Names stay as the file has them;
// weight_name_mapping.h maps them to the model's. Torch-free.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/model/weights/raw_tensor.h"

namespace mrcnn::model::weights {

enum class CheckpointOrigin {
  kDetectron2,  // names as Detectron2's modules have them
  kCaffe2,      // Caffe2/Detectron1 blob names (res2_0_branch2a_w, ...): caffe2_names.h
};

struct Detectron2Checkpoint {
  std::string source;     // the path, for messages
  std::string container;  // "torch zip", "torch legacy" or "pickle"
  CheckpointOrigin origin = CheckpointOrigin::kDetectron2;
  std::string author;  // the file's "__author__"; "Caffe2" for Caffe2 files, as Detectron2 says
  // Names need Detectron2's matching heuristics (a prefix supplied by what the model has):
  // always for Caffe2 files, and when the file sets "matching_heuristics".
  bool matching_heuristics = false;
  std::map<std::string, RawTensor> tensors;  // name in the file -> tensor
  // Entries of the state dict that are not tensors this reader reads: "name (why)".
  std::vector<std::string> skipped;
};

// Throws std::runtime_error naming the file (and the key, where one tensor is at fault) when
// it cannot be read, is neither format, has no dict of weights, or a tensor is malformed.
Detectron2Checkpoint ReadCheckpointFile(const std::filesystem::path& path);

// The same from bytes in memory; `source` names them in messages.
Detectron2Checkpoint ReadCheckpointBytes(std::string_view bytes, const std::string& source);

std::string_view OriginName(CheckpointOrigin origin);  // "Detectron2", "Caffe2"

}  // namespace mrcnn::model::weights
