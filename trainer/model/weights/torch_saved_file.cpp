#include "trainer/model/weights/torch_saved_file.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace mrcnn::model::weights {
namespace {

using Kind = PickleValue::Kind;

// torch.save's legacy magic number 0x1950a86a20f9469cfc6c, as LONG1 writes it.
constexpr std::string_view kLegacyMagic = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
// The same pickled: PROTO 2, LONG1 10 <magic>, STOP.
constexpr std::string_view kLegacyPrefix = "\x80\x02\x8a\x0a";

std::vector<int64_t> IntTuple(const PickleValue& value, const char* what) {
  if (!value.Is(Kind::kTuple) && !value.Is(Kind::kList))
    throw std::runtime_error(std::string(what) + " is a " + value.Describe() + ", not a tuple");
  std::vector<int64_t> out;
  for (const PickleValue& item : value.Items()) {
    if (!item.Is(Kind::kInt))
      throw std::runtime_error(std::string(what) + " holds " + item.Describe() + ", not an int");
    out.push_back(item.AsInt());
  }
  return out;
}

bool IsTorchUtils(const PickleValue& v, std::string_view name) {
  return v.Is(Kind::kObject) && v.Module() == "torch._utils" && v.Name() == name;
}

}  // namespace

bool TorchSavedFile::LooksLikeTorchFile(std::string_view bytes) {
  return LooksLikeZip(bytes) ||
         bytes.starts_with(std::string(kLegacyPrefix) + std::string(kLegacyMagic));
}

TorchSavedFile::TorchSavedFile(std::string_view bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
  if (LooksLikeZip(bytes_)) {
    ReadZip();
  } else if (LooksLikeTorchFile(bytes_)) {
    ReadLegacy();
  } else {
    throw std::runtime_error(source_ +
                             ": not a torch.save file (neither a zip archive nor the "
                             "legacy format's magic number)");
  }
}

void TorchSavedFile::CheckStorageId(const PickleValue& id) {
  if (!id.Is(Kind::kTuple) || id.Items().size() < 5 || !id.Items()[0].IsText() ||
      id.Items()[0].AsText() != "storage") {
    throw std::runtime_error("is not ('storage', type, key, location, numel)");
  }
}

void TorchSavedFile::ReadZip() {
  zip_ = std::make_unique<ZipArchive>(bytes_, source_);
  // One folder holds data.pkl (its name is the file's stem, or "archive").
  const ZipEntry* data_pkl = nullptr;
  for (const auto& entry : zip_->entries()) {
    const size_t slash = entry.name.find('/');
    if (slash != std::string::npos && entry.name.substr(slash + 1) == "data.pkl") {
      data_pkl = &entry;
      zip_prefix_ = entry.name.substr(0, slash + 1);
      break;
    }
  }
  if (data_pkl == nullptr)
    throw std::runtime_error(
        source_ + ": a zip archive without <folder>/data.pkl: not written by torch.save");
  if (const ZipEntry* order = zip_->Find(zip_prefix_ + "byteorder")) {
    const std::string_view text = zip_->Read(*order);
    if (text != "little" && text != "big")
      throw std::runtime_error(source_ + ": byteorder is '" + std::string(text.substr(0, 16)) +
                               "'");
    big_endian_ = text == "big";
  }
  PickleReadOptions options;
  options.source = source_ + ":" + data_pkl->name;
  options.on_persistent_id = CheckStorageId;
  const std::string_view pickle = zip_->Read(*data_pkl);
  document_ = ReadPickle(pickle, options);
}

void TorchSavedFile::ReadLegacy() {
  PickleReadOptions options;
  options.source = source_;
  const PickleDocument magic = ReadPickle(bytes_, options);
  if (!magic.root().Is(Kind::kBigInt) || magic.root().BigIntBytes() != kLegacyMagic)
    throw std::runtime_error(source_ + ": not a torch.save file (wrong magic number)");
  options.begin = magic.end_offset();
  const PickleDocument protocol = ReadPickle(bytes_, options);
  if (!protocol.root().Is(Kind::kInt) || protocol.root().AsInt() != 1001) {
    throw std::runtime_error(source_ + ": legacy torch.save protocol " +
                             protocol.root().Describe() +
                             " is not 1001, the only one this reader knows: re-save the "
                             "checkpoint with a recent torch (torch.save writes a zip)");
  }
  options.begin = protocol.end_offset();
  const PickleDocument system = ReadPickle(bytes_, options);
  if (system.root().Is(Kind::kDict)) {
    if (const PickleValue* little = system.root().Find("little_endian"))
      big_endian_ = little->Is(Kind::kBool) && !little->AsBool();
  }
  options.begin = system.end_offset();
  options.on_persistent_id = [this](const PickleValue& id) {
    CheckStorageId(id);
    const auto& items = id.Items();
    if (!items[1].Is(Kind::kGlobal) || !items[2].IsText() || !items[4].Is(Kind::kInt))
      throw std::runtime_error("is not ('storage', type, key, location, numel)");
    if (items.size() > 5 && !items[5].IsNone())
      throw std::runtime_error(
          "is a view of another storage (torch < 0.4): re-save the checkpoint with a recent torch");
    legacy_storages_[items[2].AsText()] = Storage{items[1].Name(), items[4].AsInt(), {}};
  };
  document_ = ReadPickle(bytes_, options);
  options.on_persistent_id = nullptr;
  options.begin = document_.end_offset();
  const PickleDocument keys = ReadPickle(bytes_, options);
  if (!keys.root().Is(Kind::kList))
    throw std::runtime_error(source_ + ": the legacy storage key list is a " +
                             keys.root().Describe());
  // The storages follow, in the list's order: an int64 element count, then the elements.
  size_t at = keys.end_offset();
  for (const PickleValue& key_value : keys.root().Items()) {
    const std::string key = key_value.IsText() ? key_value.AsText() : key_value.Describe();
    const auto it = legacy_storages_.find(key);
    if (it == legacy_storages_.end())
      throw std::runtime_error(source_ + ": storage '" + key + "' is listed but no tensor uses it");
    const auto dtype = DTypeFromTorchStorage(it->second.type);
    if (!dtype) {
      throw std::runtime_error(source_ + ": storage '" + key + "' is a torch." + it->second.type +
                               ", which this reader cannot skip over in a legacy file: re-save "
                               "the checkpoint with a recent torch (torch.save writes a zip)");
    }
    if (bytes_.size() - at < 8)
      throw std::runtime_error(source_ + ": the file ends inside storage '" + key +
                               "' (a truncated file?)");
    uint64_t count = 0;
    for (int i = 7; i >= 0; --i)
      count = (count << 8) | static_cast<unsigned char>(bytes_[at + static_cast<size_t>(i)]);
    at += 8;
    const size_t element = ElementSize(*dtype);
    if (count > (bytes_.size() - at) / element)
      throw std::runtime_error(source_ + ": the file ends inside storage '" + key +
                               "' (a truncated file?)");
    it->second.bytes = bytes_.substr(at, static_cast<size_t>(count) * element);
    at += static_cast<size_t>(count) * element;
  }
}

bool TorchSavedFile::IsTensor(const PickleValue& value) {
  return IsTorchUtils(value, "_rebuild_tensor_v2") || IsTorchUtils(value, "_rebuild_tensor") ||
         IsTorchUtils(value, "_rebuild_parameter") ||
         IsTorchUtils(value, "_rebuild_parameter_with_state") ||
         (value.Is(Kind::kObject) && value.Module() == "torch._tensor" &&
          value.Name() == "_rebuild_from_type_v2");
}

RawTensor TorchSavedFile::ReadTensor(const PickleValue& value, const std::string& key) const {
  if (!IsTensor(value))
    throw std::runtime_error(source_ + ": '" + key + "' is a " + value.Describe() +
                             ", not a tensor");
  return Rebuild(value.Name(), value.Args(), key, 0);
}

RawTensor TorchSavedFile::Rebuild(const std::string& function, const PickleValue& args,
                                  const std::string& key, int depth) const {
  const auto fail = [&](const std::string& what) -> RawTensor {
    throw std::runtime_error(source_ + ": tensor '" + key + "' (" + function + "): " + what);
  };
  if (depth > 4)
    return fail("wrapped in more than 4 rebuild calls");
  if (!args.Is(Kind::kTuple))
    return fail("its arguments are a " + args.Describe());
  const auto& a = args.Items();
  if (function == "_rebuild_parameter" || function == "_rebuild_parameter_with_state") {
    // (data, requires_grad, hooks[, state]): the data is the tensor.
    if (a.empty() || !IsTensor(a[0]))
      return fail("its data is not a tensor");
    return Rebuild(a[0].Name(), a[0].Args(), key, depth + 1);
  }
  if (function == "_rebuild_from_type_v2") {
    // (function, type, args, state): a tensor subclass; the function rebuilds the tensor.
    if (a.size() < 3 || !a[0].Is(Kind::kGlobal) || a[0].Module() != "torch._utils")
      return fail("it does not rebuild through torch._utils");
    return Rebuild(a[0].Name(), a[2], key, depth + 1);
  }
  if (function != "_rebuild_tensor_v2" && function != "_rebuild_tensor")
    return fail("not a plain tensor (only dense CPU/GPU tensors are read)");
  // (storage, storage_offset, size, stride, ...)
  if (a.size() < 4 || !a[0].Is(Kind::kPersistentId) || !a[1].Is(Kind::kInt))
    return fail("its arguments are not (storage, offset, size, stride, ...)");
  const auto& id = a[0].PersistentIdValue().Items();
  const std::string type = id[1].Is(Kind::kGlobal) ? id[1].Name() : id[1].Describe();
  const auto dtype = DTypeFromTorchStorage(type);
  if (!dtype)
    return fail("its storage is a torch." + type + ", which has no element type this reader knows");
  if (!id[4].Is(Kind::kInt) || id[4].AsInt() < 0)
    return fail("its storage's element count is " + id[4].Describe());
  try {
    const std::string_view storage = StorageBytes(a[0], *dtype, id[4].AsInt());
    RawTensor tensor = CopyStridedView(storage, *dtype, a[1].AsInt(), IntTuple(a[2], "size"),
                                       IntTuple(a[3], "stride"));
    if (big_endian_)
      SwapElementBytes(tensor);
    return tensor;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.starts_with(source_))
      throw;
    return fail(what);
  }
}

std::string_view TorchSavedFile::StorageBytes(const PickleValue& persistent_id, TensorDType dtype,
                                              int64_t numel) const {
  const auto& id = persistent_id.PersistentIdValue().Items();
  if (!id[2].IsText())
    throw std::runtime_error("its storage key is a " + id[2].Describe());
  const std::string storage_key = id[2].AsText();
  std::string_view bytes;
  if (zip_) {
    const ZipEntry* entry = zip_->Find(zip_prefix_ + "data/" + storage_key);
    if (entry == nullptr)
      throw std::runtime_error("its storage " + zip_prefix_ + "data/" + storage_key +
                               " is missing");
    bytes = zip_->Read(*entry);
  } else {
    const auto it = legacy_storages_.find(storage_key);
    if (it == legacy_storages_.end())
      throw std::runtime_error("its storage '" + storage_key + "' is missing");
    bytes = it->second.bytes;
  }
  const size_t element = ElementSize(dtype);
  if (static_cast<uint64_t>(numel) > bytes.size() / element) {
    throw std::runtime_error("its storage '" + storage_key + "' holds " +
                             std::to_string(bytes.size()) + " bytes, fewer than its " +
                             std::to_string(numel) + " elements");
  }
  return bytes.substr(0, static_cast<size_t>(numel) * element);
}

}  // namespace mrcnn::model::weights
