#include "trainer/model/weights/detectron2_checkpoint.h"

#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>

#include "trainer/model/weights/numpy_array.h"
#include "trainer/model/weights/pickle_reader.h"
#include "trainer/model/weights/torch_saved_file.h"

namespace mrcnn::model::weights {
namespace {

using Kind = PickleValue::Kind;

bool Truthy(const PickleValue* value) {
  return value != nullptr && ((value->Is(Kind::kBool) && value->AsBool()) ||
                              (value->Is(Kind::kInt) && value->AsInt() != 0));
}

std::string TextOr(const PickleValue* value, std::string fallback) {
  return value != nullptr && value->IsText() ? value->AsText() : fallback;
}

// Chooses the state dict inside the file's root as DetectionCheckpointer does, and fills in
// where the names come from.
const PickleValue& StateDict(const PickleValue& root, bool torch_file, Detectron2Checkpoint& out) {
  if (!root.Is(Kind::kDict)) {
    throw std::runtime_error(out.source + ": holds a " + root.Describe() +
                             ", not a dict of weights (a Detectron2 or Caffe2 checkpoint)");
  }
  out.matching_heuristics = Truthy(root.Find("matching_heuristics"));
  const PickleValue* model = root.Find("model");
  const PickleValue* author = root.Find("__author__");
  const PickleValue* state = &root;
  if (torch_file) {  // a trainer checkpoint {"model": ..., "optimizer": ...} or a bare state dict
    if (model != nullptr)
      state = model;
    out.author = TextOr(author, "");
  } else if (model != nullptr && author != nullptr) {  // Detectron2's model zoo
    state = model;
    out.author = TextOr(author, "");
  } else {  // Caffe2 / Detectron1: detection models under "blobs", ImageNet models flat
    if (const PickleValue* blobs = root.Find("blobs"))
      state = blobs;
    out.origin = CheckpointOrigin::kCaffe2;
    out.author = "Caffe2";
    out.matching_heuristics = true;
  }
  if (!state->Is(Kind::kDict)) {
    throw std::runtime_error(out.source + ": its weights (\"" +
                             (state == model ? "model" : "blobs") + "\") are a " +
                             state->Describe() + ", not a dict of tensors");
  }
  return *state;
}

std::optional<RawTensor> ReadEntry(const PickleValue& value, const std::string& key,
                                   const TorchSavedFile* torch_file, Detectron2Checkpoint& out) {
  try {
    if (IsNumpyArray(value))
      return NumpyArrayToRawTensor(value);
    if (TorchSavedFile::IsTensor(value)) {
      if (torch_file == nullptr) {
        out.skipped.push_back(key +
                              " (a torch tensor pickled without torch.save: re-save the "
                              "checkpoint with torch.save)");
        return std::nullopt;
      }
      return torch_file->ReadTensor(value, key);
    }
  } catch (const UnsupportedArrayError& e) {
    out.skipped.push_back(key + " (" + e.what() + ")");
    return std::nullopt;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.starts_with(out.source))
      throw;
    throw std::runtime_error(out.source + ": tensor '" + key + "': " + what);
  }
  out.skipped.push_back(key + " (" + value.Describe() + ", not a tensor)");
  return std::nullopt;
}

}  // namespace

std::string_view OriginName(CheckpointOrigin origin) {
  return origin == CheckpointOrigin::kCaffe2 ? "Caffe2" : "Detectron2";
}

Detectron2Checkpoint ReadCheckpointBytes(std::string_view bytes, const std::string& source) {
  Detectron2Checkpoint out;
  out.source = source;
  std::unique_ptr<TorchSavedFile> torch_file;
  std::optional<PickleDocument> pickle;
  const PickleValue* root = nullptr;
  if (TorchSavedFile::LooksLikeTorchFile(bytes)) {
    torch_file = std::make_unique<TorchSavedFile>(bytes, source);
    out.container = torch_file->format();
    root = &torch_file->root();
  } else {
    if (bytes.empty() || static_cast<unsigned char>(bytes[0]) != 0x80) {
      throw std::runtime_error(source +
                               ": neither a torch.save file nor a pickle (protocol 2 or "
                               "later); Detectron2 reads .pth and .pkl checkpoints");
    }
    PickleReadOptions options;
    options.source = source;
    pickle = ReadPickle(bytes, options);
    out.container = "pickle";
    root = &pickle->root();
  }
  const PickleValue& state = StateDict(*root, torch_file != nullptr, out);
  // Views of one storage are each copied out; a checkpoint's copies stay near its size (a few
  // tied or transposed views), a hostile file's could be any multiple of it.
  const uint64_t budget = 4 * static_cast<uint64_t>(bytes.size()) + (uint64_t{256} << 20);
  uint64_t copied = 0;
  for (const auto& [key_value, value] : state.Entries()) {
    if (!key_value.IsText()) {
      out.skipped.push_back(key_value.Describe() + " (a key that is not a name)");
      continue;
    }
    const std::string key = key_value.AsText();
    if (out.origin == CheckpointOrigin::kCaffe2 && key.ends_with("_momentum"))
      continue;  // the optimizer's state, saved beside the weights
    if (auto tensor = ReadEntry(value, key, torch_file.get(), out)) {
      copied += tensor->bytes.size();
      if (copied > budget) {
        throw std::runtime_error(source +
                                 ": its tensors' views add up to more than 4 times the "
                                 "file's size; not a checkpoint this reader accepts");
      }
      out.tensors[key] = std::move(*tensor);
    }
  }
  return out;
}

Detectron2Checkpoint ReadCheckpointFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path.string() + ": cannot open the checkpoint file");
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0)
    throw std::runtime_error(path.string() + ": cannot read the checkpoint file's size");
  bytes.resize(static_cast<size_t>(size));
  in.seekg(0, std::ios::beg);
  if (!in.read(bytes.data(), size))
    throw std::runtime_error(path.string() + ": cannot read the checkpoint file");
  return ReadCheckpointBytes(bytes, path.string());
}

}  // namespace mrcnn::model::weights
