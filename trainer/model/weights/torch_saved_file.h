#pragma once
// A file written by torch.save, read without torch:
//   - the zip format (torch >= 1.6): <prefix>/data.pkl refers to its storages by persistent
//     ids ('storage', torch.<Type>Storage, key, location, numel), each stored raw in
//     <prefix>/data/<key>;
//   - the legacy format (torch < 1.6, or _use_new_zipfile_serialization=False): a magic-
//     number pickle, the protocol version, system info, the data pickle, the list of storage
//     keys, then each storage as an int64 element count and its bytes.
// Tensors in the data pickle are torch._utils._rebuild_tensor_v2(storage, offset, size,
// stride, requires_grad, hooks) records (also _rebuild_tensor, _rebuild_parameter and
// torch._tensor._rebuild_from_type_v2 around them); ReadTensor copies one out, in C order.
// Torch-free.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "trainer/model/weights/pickle_reader.h"
#include "trainer/model/weights/raw_tensor.h"
#include "trainer/model/weights/zip_archive.h"

namespace mrcnn::model::weights {

class TorchSavedFile {
 public:
  // True when `bytes` starts like either format.
  static bool LooksLikeTorchFile(std::string_view bytes);

  // Reads the data pickle (not the storages: ReadTensor does, one at a time). `bytes` must
  // outlive this object. Throws std::runtime_error (PickleError for the pickle) naming
  // `source` when the file is neither format, or is damaged.
  TorchSavedFile(std::string_view bytes, std::string source);

  const PickleValue& root() const { return document_.root(); }
  // "torch zip" or "torch legacy".
  const char* format() const { return zip_ ? "torch zip" : "torch legacy"; }

  // True when `value` is a tensor record this reader can copy out.
  static bool IsTensor(const PickleValue& value);
  // The tensor `value` describes. Throws std::runtime_error naming the file and `key` (where
  // the tensor sits, for the message) when its storage is missing or too short, its
  // storage type has no TensorDType (complex, quantized), or the view is malformed.
  RawTensor ReadTensor(const PickleValue& value, const std::string& key) const;

 private:
  struct Storage {
    std::string type;  // torch.FloatStorage's "FloatStorage"
    int64_t numel = 0;
    std::string_view bytes;  // legacy: found while reading; zip: looked up in ReadTensor
  };

  void ReadZip();
  void ReadLegacy();
  static void CheckStorageId(const PickleValue& id);
  RawTensor Rebuild(const std::string& function, const PickleValue& args, const std::string& key,
                    int depth) const;
  std::string_view StorageBytes(const PickleValue& persistent_id, TensorDType dtype,
                                int64_t numel) const;

  std::string_view bytes_;
  std::string source_;
  std::unique_ptr<ZipArchive> zip_;
  std::string zip_prefix_;  // "archive/": the folder holding data.pkl
  bool big_endian_ = false;
  std::map<std::string, Storage> legacy_storages_;
  PickleDocument document_{nullptr, PickleValue(), 0};
};

}  // namespace mrcnn::model::weights
