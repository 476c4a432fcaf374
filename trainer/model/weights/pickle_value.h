#pragma once
// The values an unpickled document is made of (pickle_reader.h builds them): None, bool,
// int, float, str, bytes, list, tuple, dict, set, and what Python would have called to
// make anything else, recorded rather than run: a global (module + name), an object (the
// global called by REDUCE or NEWOBJ, its arguments, and what BUILD, APPENDS and SETITEMS gave
// it), and a persistent id (torch's reference to a storage stored beside the pickle).
//
// A PickleValue is a small handle. Strings, containers and objects live in their document's
// arena, so every handle to a memoised list sees what is appended to it later, and a
// container that holds itself is harmless. Bytes are views: into the input where the pickle
// stored them (no copy of a checkpoint's raw arrays), or into the arena. Handles stay valid
// while their PickleDocument lives and the input it was read from is unchanged.
// Torch-free.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrcnn::model::weights {

struct PickleNode;

class PickleValue {
 public:
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kBigInt,  // an integer wider than 64 bits: its little-endian two's complement bytes
    kFloat,
    kStr,    // UTF-8 (Python 3 str, or Python 2 unicode)
    kBytes,  // Python 3 bytes/bytearray, and Python 2 str (read as latin1 would be)
    kList,
    kTuple,
    kDict,  // also collections.OrderedDict (ClassName() tells which)
    kSet,   // set and frozenset
    kGlobal,
    kObject,
    kPersistentId,
  };

  PickleValue() = default;  // None
  static PickleValue Bool(bool value);
  static PickleValue Int(int64_t value);
  static PickleValue Float(double value);
  static PickleValue OfNode(Kind kind, PickleNode* node);

  Kind kind() const { return kind_; }
  bool Is(Kind kind) const { return kind_ == kind; }
  bool IsNone() const { return kind_ == Kind::kNone; }
  // Str or Bytes: what Python 2 and 3 use for names.
  bool IsText() const { return kind_ == Kind::kStr || kind_ == Kind::kBytes; }

  // Accessors throw std::runtime_error saying what was expected and what the value is; the
  // caller adds the file and the key.
  bool AsBool() const;
  int64_t AsInt() const;             // Int (and Bool, as Python treats it)
  double AsFloat() const;            // Float or Int
  std::string_view AsBytes() const;  // Bytes only: the raw bytes
  // Str as it is; Bytes decoded as latin1 (what pickle.load(encoding="latin1") does with a
  // Python 2 str), to UTF-8.
  std::string AsText() const;
  std::string_view BigIntBytes() const;

  // List, Tuple, Set: the elements; Object: what APPEND/APPENDS added to it.
  const std::vector<PickleValue>& Items() const;
  // Dict: the entries in the order the pickle set them (a repeated key appears again; the
  // later one is what Python keeps); Object: what SETITEM/SETITEMS added to it.
  const std::vector<std::pair<PickleValue, PickleValue>>& Entries() const;
  // Dict: the value of the last entry whose key is text equal to `key`; nullptr if none.
  const PickleValue* Find(std::string_view key) const;

  // Global and Object: the class or callable, as pickle named it.
  const std::string& Module() const;
  const std::string& Name() const;
  std::string QualifiedName() const { return Module() + "." + Name(); }
  // Dict: "" for a plain dict, "collections.OrderedDict" for an OrderedDict.
  const std::string& DictClass() const;
  // Object: the arguments tuple given to REDUCE/NEWOBJ.
  const PickleValue& Args() const;
  // Object or Dict: what BUILD gave it (None when BUILD did not run).
  const PickleValue& State() const;
  bool HasState() const;
  // PersistentId: the id the pickler wrote (torch: a tuple starting with 'storage').
  const PickleValue& PersistentIdValue() const;

  // A short description for messages: "int 3", "str 'abc'", "tuple of 4", "object
  // numpy.core.multiarray._reconstruct(...)".
  std::string Describe() const;
  static const char* KindName(Kind kind);

  // The node behind a container, object or string (nullptr for scalars); for the reader.
  PickleNode* node() const { return node_; }

 private:
  void Expect(Kind kind) const;

  Kind kind_ = Kind::kNone;
  union {
    bool bool_;
    int64_t int_;
    double float_;
  } scalar_{};
  PickleNode* node_ = nullptr;
};

// What a non-scalar value holds; which fields mean something depends on the kind.
struct PickleNode {
  std::string_view text;  // Str (UTF-8), Bytes, BigInt bytes
  std::string module;     // Global, Object
  std::string name;       // Global, Object
  std::string dict_class;
  std::vector<PickleValue> items;
  std::vector<std::pair<PickleValue, PickleValue>> entries;
  PickleValue args;  // Object: arguments; PersistentId: the id
  PickleValue state;
  bool has_state = false;
};

class PickleArena;

// One unpickled document: its root value and the arena that owns every node.
class PickleDocument {
 public:
  PickleDocument(std::shared_ptr<PickleArena> arena, PickleValue root, size_t end_offset)
      : arena_(std::move(arena)), root_(root), end_offset_(end_offset) {}
  const PickleValue& root() const { return root_; }
  // The offset just past the pickle's STOP opcode in the input (a legacy torch file holds
  // several pickles one after another, then raw storages).
  size_t end_offset() const { return end_offset_; }

 private:
  std::shared_ptr<PickleArena> arena_;
  PickleValue root_;
  size_t end_offset_ = 0;
};

}  // namespace mrcnn::model::weights
