#pragma once
// Hand-written pickles for the reader's unit tests: opcodes appended one by one, so each test
// states exactly the bytes a Python 2 or 3 pickler would write (or a broken one would), and a
// stored zip archive like torch.save's.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::model::weights::test {

class PickleBytes {
 public:
  PickleBytes& Op(uint8_t op) {
    bytes_.push_back(static_cast<char>(op));
    return *this;
  }
  PickleBytes& Little(uint64_t value, int width) {
    for (int i = 0; i < width; ++i)
      bytes_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
    return *this;
  }
  PickleBytes& Raw(std::string_view raw) {
    bytes_.append(raw);
    return *this;
  }
  PickleBytes& Proto(int version) { return Op(0x80).Little(static_cast<uint64_t>(version), 1); }
  PickleBytes& Stop() { return Op('.'); }
  PickleBytes& Mark() { return Op('('); }
  PickleBytes& Tuple() { return Op('t'); }
  PickleBytes& Reduce() { return Op('R'); }
  PickleBytes& Build() { return Op('b'); }
  PickleBytes& None() { return Op('N'); }
  PickleBytes& Bool(bool value) { return Op(value ? 0x88 : 0x89); }
  PickleBytes& Int(int64_t value) {
    if (value >= 0 && value < 256)
      return Op('K').Little(static_cast<uint64_t>(value), 1);
    return Op('J').Little(static_cast<uint64_t>(static_cast<uint32_t>(value)), 4);
  }
  // Python 3 str: SHORT_BINUNICODE (UTF-8 bytes as given).
  PickleBytes& Str(std::string_view text) {
    if (text.size() < 256)
      return Op(0x8c).Little(text.size(), 1).Raw(text);
    return Op('X').Little(text.size(), 4).Raw(text);
  }
  // Python 2 str: SHORT_BINSTRING / BINSTRING.
  PickleBytes& Py2Str(std::string_view raw) {
    if (raw.size() < 256)
      return Op('U').Little(raw.size(), 1).Raw(raw);
    return Op('T').Little(raw.size(), 4).Raw(raw);
  }
  PickleBytes& Bytes(std::string_view raw) { return Op('B').Little(raw.size(), 4).Raw(raw); }
  PickleBytes& Global(std::string_view module, std::string_view name) {
    return Op('c').Raw(module).Raw("\n").Raw(name).Raw("\n");
  }
  PickleBytes& IntTuple(const std::vector<int64_t>& values) {
    Mark();
    for (const int64_t v : values)
      Int(v);
    return Tuple();
  }
  // A numpy array as Python 2's cPickle (protocol 2) writes one: _reconstruct + BUILD with
  // the raw data as a Python 2 str. `module` is numpy.core.multiarray or numpy._core.multiarray.
  PickleBytes& NumpyArray(const std::vector<int64_t>& shape, std::string_view typestr,
                          std::string_view data, char byte_order = '<', bool fortran = false,
                          std::string_view module = "numpy.core.multiarray") {
    Global(module, "_reconstruct").Global("numpy", "ndarray").IntTuple({0}).Py2Str("b");
    Op(0x87).Reduce();  // TUPLE3, REDUCE
    Mark().Int(1).IntTuple(shape);
    Global("numpy", "dtype").Py2Str(typestr).Bool(false).Bool(true).Op(0x87).Reduce();
    Mark().Int(3).Py2Str(std::string(1, byte_order)).None().None().None().Int(-1).Int(-1).Int(0);
    Tuple().Build();
    Bool(fortran).Py2Str(data);
    return Tuple().Build();
  }

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A zip archive of stored (or, with method != 0, claimed-compressed) entries, laid out as
// torch.save lays them out: local headers with the data, then the central directory.
inline std::string StoredZip(const std::vector<std::pair<std::string, std::string>>& entries,
                             uint16_t method = 0) {
  PickleBytes out;
  PickleBytes directory;
  for (const auto& [name, data] : entries) {
    const auto offset = static_cast<uint32_t>(out.bytes().size());
    out.Little(0x04034b50, 4)
        .Little(20, 2)
        .Little(0, 2)
        .Little(method, 2)
        .Little(0, 4)
        .Little(0, 4);
    out.Little(data.size(), 4).Little(data.size(), 4).Little(name.size(), 2).Little(0, 2);
    out.Raw(name).Raw(data);
    directory.Little(0x02014b50, 4).Little(20, 2).Little(20, 2).Little(0, 2).Little(method, 2);
    directory.Little(0, 4).Little(0, 4).Little(data.size(), 4).Little(data.size(), 4);
    directory.Little(name.size(), 2)
        .Little(0, 2)
        .Little(0, 2)
        .Little(0, 2)
        .Little(0, 2)
        .Little(0, 4);
    directory.Little(offset, 4).Raw(name);
  }
  const auto directory_offset = static_cast<uint32_t>(out.bytes().size());
  out.Raw(directory.bytes());
  out.Little(0x06054b50, 4)
      .Little(0, 2)
      .Little(0, 2)
      .Little(entries.size(), 2)
      .Little(entries.size(), 2);
  out.Little(directory.bytes().size(), 4).Little(directory_offset, 4).Little(0, 2);
  return out.bytes();
}

inline std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

}  // namespace mrcnn::model::weights::test
