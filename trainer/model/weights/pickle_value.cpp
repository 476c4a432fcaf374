#include "trainer/model/weights/pickle_value.h"

#include <stdexcept>

namespace mrcnn::model::weights {

PickleValue PickleValue::Bool(bool value) {
  PickleValue v;
  v.kind_ = Kind::kBool;
  v.scalar_.bool_ = value;
  return v;
}

PickleValue PickleValue::Int(int64_t value) {
  PickleValue v;
  v.kind_ = Kind::kInt;
  v.scalar_.int_ = value;
  return v;
}

PickleValue PickleValue::Float(double value) {
  PickleValue v;
  v.kind_ = Kind::kFloat;
  v.scalar_.float_ = value;
  return v;
}

PickleValue PickleValue::OfNode(Kind kind, PickleNode* node) {
  PickleValue v;
  v.kind_ = kind;
  v.node_ = node;
  return v;
}

const char* PickleValue::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kBigInt:
      return "int (wider than 64 bits)";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kGlobal:
      return "global";
    case Kind::kObject:
      return "object";
    case Kind::kPersistentId:
      return "persistent id";
  }
  return "?";
}

void PickleValue::Expect(Kind kind) const {
  if (kind_ != kind) {
    throw std::runtime_error(std::string("expected a ") + KindName(kind) + ", found " + Describe());
  }
}

bool PickleValue::AsBool() const {
  Expect(Kind::kBool);
  return scalar_.bool_;
}

int64_t PickleValue::AsInt() const {
  if (kind_ == Kind::kBool)
    return scalar_.bool_ ? 1 : 0;
  Expect(Kind::kInt);
  return scalar_.int_;
}

double PickleValue::AsFloat() const {
  if (kind_ == Kind::kInt)
    return static_cast<double>(scalar_.int_);
  Expect(Kind::kFloat);
  return scalar_.float_;
}

std::string_view PickleValue::AsBytes() const {
  Expect(Kind::kBytes);
  return node_->text;
}

std::string PickleValue::AsText() const {
  if (kind_ == Kind::kStr)
    return std::string(node_->text);
  Expect(Kind::kBytes);
  std::string utf8;
  utf8.reserve(node_->text.size());
  for (const char c : node_->text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      utf8.push_back(c);
    } else {  // latin1 code point U+0080..U+00FF as two UTF-8 bytes
      utf8.push_back(static_cast<char>(0xC0 | (byte >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (byte & 0x3F)));
    }
  }
  return utf8;
}

std::string_view PickleValue::BigIntBytes() const {
  Expect(Kind::kBigInt);
  return node_->text;
}

const std::vector<PickleValue>& PickleValue::Items() const {
  if (kind_ != Kind::kList && kind_ != Kind::kTuple && kind_ != Kind::kSet &&
      kind_ != Kind::kObject) {
    throw std::runtime_error("expected a list or tuple, found " + Describe());
  }
  return node_->items;
}

const std::vector<std::pair<PickleValue, PickleValue>>& PickleValue::Entries() const {
  if (kind_ != Kind::kDict && kind_ != Kind::kObject)
    throw std::runtime_error("expected a dict, found " + Describe());
  return node_->entries;
}

const PickleValue* PickleValue::Find(std::string_view key) const {
  Expect(Kind::kDict);
  const PickleValue* found = nullptr;
  for (const auto& [k, v] : node_->entries) {
    // Python 2 pickles give names as bytes; only ASCII names are looked up, so comparing
    // the raw bytes equals comparing the latin1-decoded text.
    if (k.IsText() && k.node_->text == key)
      found = &v;
  }
  return found;
}

const std::string& PickleValue::Module() const {
  if (kind_ != Kind::kGlobal && kind_ != Kind::kObject)
    throw std::runtime_error("expected a global or an object, found " + Describe());
  return node_->module;
}

const std::string& PickleValue::Name() const {
  if (kind_ != Kind::kGlobal && kind_ != Kind::kObject)
    throw std::runtime_error("expected a global or an object, found " + Describe());
  return node_->name;
}

const std::string& PickleValue::DictClass() const {
  Expect(Kind::kDict);
  return node_->dict_class;
}

const PickleValue& PickleValue::Args() const {
  Expect(Kind::kObject);
  return node_->args;
}

const PickleValue& PickleValue::State() const {
  if (kind_ != Kind::kObject && kind_ != Kind::kDict)
    throw std::runtime_error("expected an object, found " + Describe());
  return node_->state;
}

bool PickleValue::HasState() const {
  return (kind_ == Kind::kObject || kind_ == Kind::kDict) && node_->has_state;
}

const PickleValue& PickleValue::PersistentIdValue() const {
  Expect(Kind::kPersistentId);
  return node_->args;
}

std::string PickleValue::Describe() const {
  switch (kind_) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return scalar_.bool_ ? "True" : "False";
    case Kind::kInt:
      return "int " + std::to_string(scalar_.int_);
    case Kind::kFloat:
      return "float " + std::to_string(scalar_.float_);
    case Kind::kStr:
    case Kind::kBytes: {
      constexpr size_t kShown = 40;
      std::string shown(node_->text.substr(0, kShown));
      for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F)
          c = '?';
      }
      return std::string(KindName(kind_)) + " '" + shown +
             (node_->text.size() > kShown ? "...'" : "'");
    }
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kSet:
      return std::string(KindName(kind_)) + " of " + std::to_string(node_->items.size());
    case Kind::kDict:
      return (node_->dict_class.empty() ? std::string("dict") : node_->dict_class) + " of " +
             std::to_string(node_->entries.size());
    case Kind::kGlobal:
      return "global " + node_->module + "." + node_->name;
    case Kind::kObject:
      return "object " + node_->module + "." + node_->name + "(...)";
    case Kind::kBigInt:
    case Kind::kPersistentId:
      return KindName(kind_);
  }
  return "?";
}

}  // namespace mrcnn::model::weights
