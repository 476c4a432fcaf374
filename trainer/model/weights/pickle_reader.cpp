#include "trainer/model/weights/pickle_reader.h"

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mrcnn::model::weights {

// Owns every node and every string the reader had to make (the rest are views of the input).
// Nodes never move (std::deque), so handles to them stay valid as the document grows.
class PickleArena {
 public:
  PickleNode* NewNode() { return &nodes_.emplace_back(); }
  std::string_view Keep(std::string text) { return strings_.emplace_back(std::move(text)); }

 private:
  std::deque<PickleNode> nodes_;
  std::deque<std::string> strings_;
};

namespace {

using Kind = PickleValue::Kind;

// Opcodes by the names pickletools gives them.
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kFloat = 'F',
  kInt = 'I',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kLong = 'L',
  kBinInt2 = 'M',
  kNone = 'N',
  kPersId = 'P',
  kBinPersId = 'Q',
  kReduce = 'R',
  kString = 'S',
  kBinString = 'T',
  kShortBinString = 'U',
  kUnicode = 'V',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kGet = 'g',
  kBinGet = 'h',
  kInst = 'i',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kObj = 'o',
  kPut = 'p',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kProto = 0x80,
  kNewObj = 0x81,
  kExt1 = 0x82,
  kExt2 = 0x83,
  kExt4 = 0x84,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kEmptySet = 0x8f,
  kAddItems = 0x90,
  kFrozenSet = 0x91,
  kNewObjEx = 0x92,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
  kByteArray8 = 0x96,
  kNextBuffer = 0x97,
  kReadonlyBuffer = 0x98,
};

struct OpInfo {
  uint8_t op;
  const char* name;
};

constexpr OpInfo kOpNames[] = {
    {kMark, "MARK"},
    {kStop, "STOP"},
    {kPop, "POP"},
    {kPopMark, "POP_MARK"},
    {kDup, "DUP"},
    {kFloat, "FLOAT"},
    {kInt, "INT"},
    {kBinInt, "BININT"},
    {kBinInt1, "BININT1"},
    {kLong, "LONG"},
    {kBinInt2, "BININT2"},
    {kNone, "NONE"},
    {kPersId, "PERSID"},
    {kBinPersId, "BINPERSID"},
    {kReduce, "REDUCE"},
    {kString, "STRING"},
    {kBinString, "BINSTRING"},
    {kShortBinString, "SHORT_BINSTRING"},
    {kUnicode, "UNICODE"},
    {kBinUnicode, "BINUNICODE"},
    {kAppend, "APPEND"},
    {kBuild, "BUILD"},
    {kGlobal, "GLOBAL"},
    {kDict, "DICT"},
    {kEmptyDict, "EMPTY_DICT"},
    {kAppends, "APPENDS"},
    {kGet, "GET"},
    {kBinGet, "BINGET"},
    {kInst, "INST"},
    {kLongBinGet, "LONG_BINGET"},
    {kList, "LIST"},
    {kEmptyList, "EMPTY_LIST"},
    {kObj, "OBJ"},
    {kPut, "PUT"},
    {kBinPut, "BINPUT"},
    {kLongBinPut, "LONG_BINPUT"},
    {kSetItem, "SETITEM"},
    {kTuple, "TUPLE"},
    {kEmptyTuple, "EMPTY_TUPLE"},
    {kSetItems, "SETITEMS"},
    {kBinFloat, "BINFLOAT"},
    {kBinBytes, "BINBYTES"},
    {kShortBinBytes, "SHORT_BINBYTES"},
    {kProto, "PROTO"},
    {kNewObj, "NEWOBJ"},
    {kExt1, "EXT1"},
    {kExt2, "EXT2"},
    {kExt4, "EXT4"},
    {kTuple1, "TUPLE1"},
    {kTuple2, "TUPLE2"},
    {kTuple3, "TUPLE3"},
    {kNewTrue, "NEWTRUE"},
    {kNewFalse, "NEWFALSE"},
    {kLong1, "LONG1"},
    {kLong4, "LONG4"},
    {kShortBinUnicode, "SHORT_BINUNICODE"},
    {kBinUnicode8, "BINUNICODE8"},
    {kBinBytes8, "BINBYTES8"},
    {kEmptySet, "EMPTY_SET"},
    {kAddItems, "ADDITEMS"},
    {kFrozenSet, "FROZENSET"},
    {kNewObjEx, "NEWOBJ_EX"},
    {kStackGlobal, "STACK_GLOBAL"},
    {kMemoize, "MEMOIZE"},
    {kFrame, "FRAME"},
    {kByteArray8, "BYTEARRAY8"},
    {kNextBuffer, "NEXT_BUFFER"},
    {kReadonlyBuffer, "READONLY_BUFFER"},
};

// nullptr for a byte that is no opcode.
const char* OpName(uint8_t op) {
  for (const OpInfo& info : kOpNames) {
    if (info.op == op)
      return info.name;
  }
  return nullptr;
}

bool IsBuiltinsModule(const std::string& module) {
  return module == "builtins" || module == "__builtin__";  // Python 3, Python 2
}

// Python's str.encode("latin1") of UTF-8 text; false when a code point is above U+00FF.
bool EncodeLatin1(std::string_view utf8, std::string& out) {
  out.clear();
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto byte = static_cast<unsigned char>(utf8[i]);
    if (byte < 0x80) {
      out.push_back(static_cast<char>(byte));
    } else if ((byte == 0xC2 || byte == 0xC3) && i + 1 < utf8.size() &&
               (static_cast<unsigned char>(utf8[i + 1]) & 0xC0) == 0x80) {
      out.push_back(static_cast<char>(((byte & 0x03) << 6) |
                                      (static_cast<unsigned char>(utf8[i + 1]) & 0x3F)));
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

class PickleMachine {
 public:
  PickleMachine(std::string_view bytes, const PickleReadOptions& options)
      : bytes_(bytes),
        options_(options),
        pos_(options.begin),
        arena_(std::make_shared<PickleArena>()) {}

  PickleDocument Run() {
    if (pos_ > bytes_.size())
      throw PickleError(options_.source + ": a pickle cannot start at offset " +
                        std::to_string(pos_) + ", past the end of the input");
    for (;;) {
      if (pos_ >= bytes_.size()) {
        throw PickleError(options_.source + ": the input ends at offset " + std::to_string(pos_) +
                          " before the pickle's STOP opcode (a truncated file?)");
      }
      op_offset_ = pos_;
      op_ = static_cast<uint8_t>(bytes_[pos_++]);
      if (op_ == kStop) {
        const PickleValue root = Pop();
        return PickleDocument(arena_, root, pos_);
      }
      Step();
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", op_);
    const char* name = OpName(op_);
    std::string opcode;
    if (name == nullptr) {
      throw PickleError(options_.source + ": unknown pickle opcode " + code + " at offset " +
                        std::to_string(op_offset_) + " (" + what + ")");
    }
    opcode = std::string(code);
    if (op_ >= 0x20 && op_ < 0x7F)
      opcode += std::string(" '") + static_cast<char>(op_) + "'";
    throw PickleError(options_.source + ": pickle opcode " + opcode + " (" + name + ") at offset " +
                      std::to_string(op_offset_) + ": " + what);
  }

  // --- input ---
  std::string_view Take(uint64_t n) {
    if (n > bytes_.size() - pos_) {
      Fail("needs " + std::to_string(n) + " bytes, the input has " +
           std::to_string(bytes_.size() - pos_) + " left (a truncated file?)");
    }
    const std::string_view out = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  uint64_t ReadLittle(int width) {
    const std::string_view raw = Take(static_cast<uint64_t>(width));
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i)
      value = (value << 8) | static_cast<unsigned char>(raw[static_cast<size_t>(i)]);
    return value;
  }
  std::string_view ReadLine() {
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos)
      Fail("its text argument has no end of line before the end of the input");
    const std::string_view line = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return line;
  }
  int64_t ParseDecimal(std::string_view text) {
    int64_t value = 0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || text.empty())
      Fail("'" + std::string(text.substr(0, 40)) + "' is not a decimal integer of 64 bits");
    return value;
  }

  // --- stack ---
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  PickleValue Pop() {
    if (stack_.size() <= Floor())
      Fail("the stack is empty (a malformed pickle)");
    const PickleValue top = stack_.back();
    stack_.pop_back();
    return top;
  }
  PickleValue& Top() {
    if (stack_.size() <= Floor())
      Fail("the stack is empty (a malformed pickle)");
    return stack_.back();
  }
  std::vector<PickleValue> PopToMark() {
    if (marks_.empty())
      Fail("there is no MARK to pop to (a malformed pickle)");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark),
                                   stack_.end());
    stack_.resize(mark);
    return items;
  }
  void Push(const PickleValue& value) { stack_.push_back(value); }

  // --- values ---
  PickleValue New(Kind kind) { return PickleValue::OfNode(kind, arena_->NewNode()); }
  PickleValue Text(Kind kind, std::string_view view) {
    PickleValue value = New(kind);
    value.node()->text = view;
    return value;
  }
  PickleValue Sequence(Kind kind, std::vector<PickleValue> items) {
    PickleValue value = New(kind);
    value.node()->items = std::move(items);
    return value;
  }
  PickleValue Global(std::string module, std::string name) {
    PickleValue value = New(Kind::kGlobal);
    value.node()->module = std::move(module);
    value.node()->name = std::move(name);
    return value;
  }
  PickleValue OrderedDict() {
    PickleValue value = New(Kind::kDict);
    value.node()->dict_class = "collections.OrderedDict";
    return value;
  }
  // Little-endian two's complement (LONG1/LONG4): an Int when it fits 64 bits.
  PickleValue Long(std::string_view le) {
    if (le.empty())
      return PickleValue::Int(0);
    const bool negative = (static_cast<unsigned char>(le.back()) & 0x80) != 0;
    const unsigned char fill = negative ? 0xFF : 0x00;
    size_t n = le.size();
    while (n > 1 && static_cast<unsigned char>(le[n - 1]) == fill &&
           ((static_cast<unsigned char>(le[n - 2]) & 0x80) != 0) == negative) {
      --n;
    }
    if (n > 8)
      return Text(Kind::kBigInt, le);
    uint64_t bits = 0;
    for (size_t i = 0; i < n; ++i)
      bits |= static_cast<uint64_t>(static_cast<unsigned char>(le[i])) << (8 * i);
    if (negative && n < 8)
      bits |= ~uint64_t{0} << (8 * n);
    return PickleValue::Int(static_cast<int64_t>(bits));
  }

  void AddEntries(PickleValue& target, const std::vector<PickleValue>& flat) {
    if (!target.Is(Kind::kDict) && !target.Is(Kind::kObject))
      Fail("sets items on a " + target.Describe() + ", not a dict");
    if (flat.size() % 2 != 0)
      Fail("has an odd number of keys and values");
    for (size_t i = 0; i < flat.size(); i += 2)
      target.node()->entries.emplace_back(flat[i], flat[i + 1]);
  }
  void AddItems(PickleValue& target, const std::vector<PickleValue>& items, Kind expected) {
    if (!target.Is(expected) && !target.Is(Kind::kObject))
      Fail(std::string("adds items to a ") + target.Describe() + ", not a " +
           PickleValue::KindName(expected));
    auto& into = target.node()->items;
    into.insert(into.end(), items.begin(), items.end());
  }

  // collections.OrderedDict, bytes, and sets as Python would make them; an object record
  // for any other callable.
  PickleValue Call(const PickleValue& callable, const PickleValue& args) {
    if (!callable.Is(Kind::kGlobal))
      Fail("calls a " + callable.Describe() + ", not a global");
    if (!args.Is(Kind::kTuple))
      Fail("the arguments are a " + args.Describe() + ", not a tuple");
    const std::string& module = callable.Module();
    const std::string& name = callable.Name();
    const auto& a = args.Items();
    if (module == "collections" && name == "OrderedDict")
      return MakeOrderedDict(a);
    if ((module == "_codecs" && name == "encode") ||
        (IsBuiltinsModule(module) && (name == "bytes" || name == "bytearray"))) {
      return MakeBytes(a);
    }
    if (IsBuiltinsModule(module) && (name == "set" || name == "frozenset")) {
      if (a.empty())
        return Sequence(Kind::kSet, {});
      if (a.size() == 1 && (a[0].Is(Kind::kList) || a[0].Is(Kind::kTuple))) {
        ChargeCopy(a[0].Items().size());
        return Sequence(Kind::kSet, a[0].Items());
      }
      Fail("calls " + name + " with arguments this reader does not know");
    }
    PickleValue object = New(Kind::kObject);
    object.node()->module = module;
    object.node()->name = name;
    object.node()->args = args;
    return object;
  }
  PickleValue MakeOrderedDict(const std::vector<PickleValue>& args) {
    PickleValue dict = OrderedDict();
    if (args.empty())
      return dict;
    // Python 2.7's OrderedDict.__reduce__ gives its items as a list of [key, value] lists.
    if (args.size() == 1 && (args[0].Is(Kind::kList) || args[0].Is(Kind::kTuple))) {
      ChargeCopy(args[0].Items().size());
      for (const PickleValue& pair : args[0].Items()) {
        if ((!pair.Is(Kind::kList) && !pair.Is(Kind::kTuple)) || pair.Items().size() != 2)
          Fail("makes an OrderedDict from an item that is not a (key, value) pair");
        dict.node()->entries.emplace_back(pair.Items()[0], pair.Items()[1]);
      }
      return dict;
    }
    Fail("makes an OrderedDict from arguments this reader does not know");
  }
  PickleValue MakeBytes(const std::vector<PickleValue>& args) {
    if (args.empty())
      return Text(Kind::kBytes, {});
    if (args.size() == 1 && args[0].Is(Kind::kBytes))
      return args[0];
    // Python 3 at protocol 2 writes b"..." as _codecs.encode("...", "latin1").
    if (args.size() == 2 && args[0].Is(Kind::kStr) && args[1].Is(Kind::kStr)) {
      const std::string encoding = args[1].AsText();
      if (encoding != "latin1" && encoding != "latin-1" && encoding != "iso-8859-1")
        Fail("encodes text as " + encoding + "; only latin1 (Python's bytes pickling) is known");
      std::string raw;
      if (!EncodeLatin1(args[0].node()->text, raw))
        Fail("encodes text as latin1 that has characters outside latin1");
      return Text(Kind::kBytes, arena_->Keep(std::move(raw)));
    }
    Fail("makes bytes from arguments this reader does not know");
  }

  // Building a set or an OrderedDict from a memoised list copies it; a hostile pickle could
  // do that once per few bytes, so copies are bounded by a multiple of the input's size.
  void ChargeCopy(size_t items) {
    if (items > copy_budget_)
      Fail("copies more elements than a pickle of this size can hold (a malformed pickle)");
    copy_budget_ -= items;
  }

  void Memoize(uint64_t key) {
    if (stack_.size() <= Floor())
      Fail("memoises from an empty stack");
    memo_[key] = stack_.back();
  }
  void Recall(uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end())
      Fail("memo key " + std::to_string(key) + " was never stored");
    Push(it->second);
  }

  // One opcode: each family below runs the opcodes it knows and answers false to the rest.
  void Step() {
    if (StepStack() || StepScalar() || StepText() || StepContainer() || StepMemo() ||
        StepObject()) {
      return;
    }
    switch (op_) {
      case kExt1:
      case kExt2:
      case kExt4:
        Fail("extension codes (copyreg's extension registry) are not supported");
      case kNextBuffer:
      case kReadonlyBuffer:
        Fail(
            "out-of-band buffers (protocol 5 with a buffer_callback) are not supported: "
            "pickle the data in-band");
      default:
        Fail("not a pickle, or a protocol newer than 5");
    }
  }

  // Framing, the protocol version, and the stack and its marks.
  bool StepStack() {
    switch (op_) {
      case kProto: {
        const auto version = static_cast<unsigned char>(Take(1)[0]);
        if (version > 5)
          Fail("protocol " + std::to_string(version) +
               " is newer than 5, the newest this reader knows");
        return true;
      }
      case kFrame:  // a hint for buffered readers; the whole input is in memory
        if (ReadLittle(8) > bytes_.size() - pos_)
          Fail("the frame is longer than the rest of the input (a truncated file?)");
        return true;
      case kMark:
        marks_.push_back(stack_.size());
        return true;
      case kPop:
        if (stack_.size() > Floor()) {
          stack_.pop_back();
        } else {
          PopToMark();  // as CPython: a POP with nothing above the mark pops the mark
        }
        return true;
      case kPopMark:
        PopToMark();
        return true;
      case kDup: {
        const PickleValue top = Top();  // a copy: pushing may move the stack
        Push(top);
        return true;
      }
      default:
        return false;
    }
  }

  // None, bools, integers and floats.
  bool StepScalar() {
    switch (op_) {
      case kNone:
        Push(PickleValue());
        return true;
      case kNewTrue:
        Push(PickleValue::Bool(true));
        return true;
      case kNewFalse:
        Push(PickleValue::Bool(false));
        return true;
      case kBinInt:
        Push(PickleValue::Int(static_cast<int32_t>(static_cast<uint32_t>(ReadLittle(4)))));
        return true;
      case kBinInt1:
        Push(PickleValue::Int(static_cast<int64_t>(ReadLittle(1))));
        return true;
      case kBinInt2:
        Push(PickleValue::Int(static_cast<int64_t>(ReadLittle(2))));
        return true;
      case kLong1:
        Push(Long(Take(ReadLittle(1))));
        return true;
      case kLong4: {
        const auto n = static_cast<int32_t>(static_cast<uint32_t>(ReadLittle(4)));
        if (n < 0)
          Fail("has a negative length");
        Push(Long(Take(static_cast<uint64_t>(n))));
        return true;
      }
      case kInt: {  // protocol 0, and Python 2's bools: "I01\n", "I00\n"
        const std::string_view line = ReadLine();
        if (line == "01" || line == "00") {
          Push(PickleValue::Bool(line == "01"));
        } else {
          Push(PickleValue::Int(ParseDecimal(line)));
        }
        return true;
      }
      case kLong: {
        std::string_view line = ReadLine();
        if (!line.empty() && line.back() == 'L')
          line.remove_suffix(1);
        Push(PickleValue::Int(ParseDecimal(line)));
        return true;
      }
      case kBinFloat:
        Push(PickleValue::Float(std::bit_cast<double>(ReadBigEndian8())));
        return true;
      case kFloat: {
        const std::string line(ReadLine());
        char* end = nullptr;
        const double value = std::strtod(line.c_str(), &end);
        if (line.empty() || end != line.c_str() + line.size())
          Fail("'" + line.substr(0, 40) + "' is not a float");
        Push(PickleValue::Float(value));
        return true;
      }
      default:
        return false;
    }
  }

  // str and bytes.
  bool StepText() {
    switch (op_) {
      case kShortBinString:  // Python 2 str: bytes
        Push(Text(Kind::kBytes, Take(ReadLittle(1))));
        return true;
      case kBinString: {
        const auto n = static_cast<int32_t>(static_cast<uint32_t>(ReadLittle(4)));
        if (n < 0)
          Fail("has a negative length");
        Push(Text(Kind::kBytes, Take(static_cast<uint64_t>(n))));
        return true;
      }
      case kShortBinBytes:
        Push(Text(Kind::kBytes, Take(ReadLittle(1))));
        return true;
      case kBinBytes:
        Push(Text(Kind::kBytes, Take(ReadLittle(4))));
        return true;
      case kBinBytes8:
      case kByteArray8:
        Push(Text(Kind::kBytes, Take(ReadLittle(8))));
        return true;
      case kShortBinUnicode:
        Push(Text(Kind::kStr, Take(ReadLittle(1))));
        return true;
      case kBinUnicode:
        Push(Text(Kind::kStr, Take(ReadLittle(4))));
        return true;
      case kBinUnicode8:
        Push(Text(Kind::kStr, Take(ReadLittle(8))));
        return true;
      case kString:
      case kUnicode:
        Fail(
            "protocol 0 text strings are not supported: re-save the file with pickle protocol 2 or "
            "later");
      default:
        return false;
    }
  }

  // Lists, tuples, dicts and sets.
  bool StepContainer() {
    switch (op_) {
      case kEmptyList:
        Push(New(Kind::kList));
        return true;
      case kEmptyTuple:
        Push(New(Kind::kTuple));
        return true;
      case kEmptyDict:
        Push(New(Kind::kDict));
        return true;
      case kEmptySet:
        Push(New(Kind::kSet));
        return true;
      case kList:
        Push(Sequence(Kind::kList, PopToMark()));
        return true;
      case kTuple:
        Push(Sequence(Kind::kTuple, PopToMark()));
        return true;
      case kFrozenSet:
        Push(Sequence(Kind::kSet, PopToMark()));
        return true;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = static_cast<size_t>(op_ - kTuple1) + 1;
        std::vector<PickleValue> items(n);
        for (size_t i = n; i-- > 0;)
          items[i] = Pop();
        Push(Sequence(Kind::kTuple, std::move(items)));
        return true;
      }
      case kDict: {
        PickleValue dict = New(Kind::kDict);
        AddEntries(dict, PopToMark());
        Push(dict);
        return true;
      }
      case kAppend: {
        const PickleValue item = Pop();
        AddItems(Top(), {item}, Kind::kList);
        return true;
      }
      case kAppends: {
        const auto items = PopToMark();
        AddItems(Top(), items, Kind::kList);
        return true;
      }
      case kAddItems: {
        const auto items = PopToMark();
        AddItems(Top(), items, Kind::kSet);
        return true;
      }
      case kSetItem: {
        const PickleValue value = Pop();
        const PickleValue key = Pop();
        AddEntries(Top(), {key, value});
        return true;
      }
      case kSetItems: {
        const auto flat = PopToMark();
        AddEntries(Top(), flat);
        return true;
      }
      default:
        return false;
    }
  }

  // The memo.
  bool StepMemo() {
    switch (op_) {
      case kPut:
        Memoize(static_cast<uint64_t>(ParseDecimal(ReadLine())));
        return true;
      case kBinPut:
        Memoize(ReadLittle(1));
        return true;
      case kLongBinPut:
        Memoize(ReadLittle(4));
        return true;
      case kMemoize:
        Memoize(memo_.size());
        return true;
      case kGet:
        Recall(static_cast<uint64_t>(ParseDecimal(ReadLine())));
        return true;
      case kBinGet:
        Recall(ReadLittle(1));
        return true;
      case kLongBinGet:
        Recall(ReadLittle(4));
        return true;
      default:
        return false;
    }
  }

  // Globals, calls, object state and persistent ids.
  bool StepObject() {
    switch (op_) {
      case kGlobal: {
        std::string module(ReadLine());
        std::string name(ReadLine());
        Push(Global(std::move(module), std::move(name)));
        return true;
      }
      case kStackGlobal: {
        const PickleValue name = Pop();
        const PickleValue module = Pop();
        if (!module.Is(Kind::kStr) || !name.Is(Kind::kStr))
          Fail("the module and name are not both str");
        Push(Global(module.AsText(), name.AsText()));
        return true;
      }
      case kReduce: {
        const PickleValue args = Pop();
        const PickleValue callable = Pop();
        Push(Call(callable, args));
        return true;
      }
      case kNewObj: {
        const PickleValue args = Pop();
        const PickleValue cls = Pop();
        Push(Call(cls, args));
        return true;
      }
      case kNewObjEx: {
        const PickleValue kwargs = Pop();
        const PickleValue args = Pop();
        const PickleValue cls = Pop();
        if (!kwargs.Is(Kind::kDict) || !kwargs.Entries().empty())
          Fail("passes keyword arguments, which this reader does not record");
        Push(Call(cls, args));
        return true;
      }
      case kObj: {  // protocol 1: MARK cls args... OBJ
        auto items = PopToMark();
        if (items.empty())
          Fail("has no class after its MARK");
        const PickleValue cls = items.front();
        items.erase(items.begin());
        Push(Call(cls, Sequence(Kind::kTuple, std::move(items))));
        return true;
      }
      case kInst: {  // protocol 0: INST module\nname\n with MARK args...
        std::string module(ReadLine());
        std::string name(ReadLine());
        const PickleValue cls = Global(std::move(module), std::move(name));
        Push(Call(cls, Sequence(Kind::kTuple, PopToMark())));
        return true;
      }
      case kBuild: {
        const PickleValue state = Pop();
        PickleValue& target = Top();
        if (!target.Is(Kind::kObject) && !target.Is(Kind::kDict))
          Fail("gives state to a " + target.Describe() + ", not an object");
        target.node()->state = state;
        target.node()->has_state = true;
        return true;
      }

      case kBinPersId:
        PersistentId(Pop());
        return true;
      case kPersId:
        PersistentId(Text(Kind::kStr, ReadLine()));
        return true;
      default:
        return false;
    }
  }

  uint64_t ReadBigEndian8() {
    const std::string_view raw = Take(8);
    uint64_t value = 0;
    for (const char c : raw)
      value = (value << 8) | static_cast<unsigned char>(c);
    return value;
  }

  void PersistentId(const PickleValue& id) {
    if (!options_.on_persistent_id)
      Fail("a persistent id, which only torch.save files have: this is not a plain pickle");
    try {
      options_.on_persistent_id(id);
    } catch (const PickleError&) {
      throw;
    } catch (const std::exception& e) {
      Fail(std::string("persistent id ") + id.Describe() + ": " + e.what());
    }
    PickleValue value = New(Kind::kPersistentId);
    value.node()->args = id;
    Push(value);
  }

  std::string_view bytes_;
  const PickleReadOptions& options_;
  size_t pos_;
  size_t op_offset_ = 0;
  uint8_t op_ = 0;
  std::shared_ptr<PickleArena> arena_;
  std::vector<PickleValue> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, PickleValue> memo_;
  size_t copy_budget_ = 8 * bytes_.size() + (size_t{1} << 20);
};

}  // namespace

PickleDocument ReadPickle(std::string_view bytes, const PickleReadOptions& options) {
  return PickleMachine(bytes, options).Run();
}

}  // namespace mrcnn::model::weights
