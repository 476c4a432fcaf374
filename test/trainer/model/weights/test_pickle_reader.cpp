// The pickle machine on hand-written pickles: each opcode family, the builtins it evaluates,
// shared (memoised) containers, persistent ids, and its errors with their offsets.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "test/trainer/model/weights/pickle_bytes.h"
#include "trainer/model/weights/pickle_reader.h"

using mrcnn::model::weights::PickleDocument;
using mrcnn::model::weights::PickleError;
using mrcnn::model::weights::PickleReadOptions;
using mrcnn::model::weights::PickleValue;
using mrcnn::model::weights::ReadPickle;
using mrcnn::model::weights::test::PickleBytes;
using Kind = PickleValue::Kind;

namespace {

PickleDocument Read(const std::string& bytes) {
  PickleReadOptions options;
  options.source = "test.pkl";
  return ReadPickle(bytes, options);
}

// The message ReadPickle throws for `bytes`.
std::string ErrorOf(const std::string& bytes, PickleReadOptions options = {}) {
  if (options.source.empty())
    options.source = "test.pkl";
  try {
    ReadPickle(bytes, options);
  } catch (const PickleError& e) {
    return e.what();
  }
  FAIL("no error for a bad pickle");
  return "";
}

}  // namespace

TEST_CASE("pickle: scalars of every integer, float and bool opcode", "[pickle]") {
  PickleBytes p;
  p.Proto(2).Mark();
  p.None().Bool(true).Bool(false);
  p.Op('K').Little(200, 1);                                            // BININT1
  p.Op('M').Little(65000, 2);                                          // BININT2
  p.Op('J').Little(0xFFFFFFFE, 4);                                     // BININT -2
  p.Op(0x8a).Little(0, 1);                                             // LONG1 of no bytes: 0
  p.Op(0x8a).Little(2, 1).Little(0x7FFF, 2);                           // LONG1 32767
  p.Op(0x8a).Little(1, 1).Little(0xFF, 1);                             // LONG1 -1
  p.Op(0x8a).Little(9, 1).Little(0xFFFFFFFFFFFFFFFF, 8).Little(0, 1);  // 2^64-1: wider than int64
  p.Op(0x8b).Little(8, 4).Little(0x8000000000000000, 8);               // LONG4 int64 min
  p.Op('G').Raw(std::string("\x3f\xf8\x00\x00\x00\x00\x00\x00", 8));   // BINFLOAT 1.5, big-endian
  p.Raw("I01\n").Raw("I00\n").Raw("I-42\n").Raw("L123456789012L\n").Raw("F2.5\n");
  p.Tuple().Stop();
  const PickleDocument doc = Read(p.bytes());
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 17);
  CHECK(items[0].IsNone());
  CHECK(items[1].AsBool());
  CHECK_FALSE(items[2].AsBool());
  CHECK(items[3].AsInt() == 200);
  CHECK(items[4].AsInt() == 65000);
  CHECK(items[5].AsInt() == -2);
  CHECK(items[6].AsInt() == 0);
  CHECK(items[7].AsInt() == 0x7FFF);
  CHECK(items[8].AsInt() == -1);
  REQUIRE(items[9].Is(Kind::kBigInt));
  CHECK(items[9].BigIntBytes().size() == 9);
  CHECK(items[10].AsInt() == INT64_MIN);
  CHECK(items[11].AsFloat() == 1.5);
  CHECK(items[12].Is(Kind::kBool));
  CHECK(items[12].AsBool());
  CHECK_FALSE(items[13].AsBool());
  CHECK(items[14].AsInt() == -42);
  CHECK(items[15].AsInt() == 123456789012);
  CHECK(items[16].AsFloat() == 2.5);
  CHECK(doc.end_offset() == p.bytes().size());
}

TEST_CASE("pickle: Python 3 str, Python 2 str as latin1 bytes, and bytes", "[pickle]") {
  PickleBytes p;
  p.Proto(4).Mark();
  p.Str("caf\xc3\xa9");                                    // SHORT_BINUNICODE, UTF-8
  p.Op('X').Little(3, 4).Raw("abc");                       // BINUNICODE
  p.Op(0x8d).Little(2, 8).Raw("xy");                       // BINUNICODE8
  p.Py2Str("caf\xe9");                                     // SHORT_BINSTRING: a Python 2 str
  p.Op('T').Little(4, 4).Raw(std::string("\0\1\2\3", 4));  // BINSTRING
  p.Op('C').Little(2, 1).Raw("hi");                        // SHORT_BINBYTES
  p.Bytes("raw");                                          // BINBYTES
  p.Op(0x8e).Little(1, 8).Raw("z");                        // BINBYTES8
  p.Op(0x96).Little(2, 8).Raw("ba");                       // BYTEARRAY8
  p.Tuple().Stop();
  const std::string bytes = p.bytes();
  const PickleDocument doc = Read(bytes);
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 9);
  CHECK(items[0].Is(Kind::kStr));
  CHECK(items[0].AsText() == "caf\xc3\xa9");
  CHECK(items[1].AsText() == "abc");
  CHECK(items[2].AsText() == "xy");
  CHECK(items[3].Is(Kind::kBytes));
  CHECK(items[3].AsBytes() == "caf\xe9");
  CHECK(items[3].AsText() == "caf\xc3\xa9");  // decoded as latin1, as encoding="latin1" does
  CHECK(items[4].AsBytes() == std::string("\0\1\2\3", 4));
  CHECK(items[5].AsBytes() == "hi");
  CHECK(items[6].AsBytes() == "raw");
  CHECK(items[7].AsBytes() == "z");
  CHECK(items[8].AsBytes() == "ba");
  // Raw data is a view of the input, not a copy (checkpoints hold hundreds of MB of it).
  CHECK(items[6].AsBytes().data() >= bytes.data());
  CHECK(items[6].AsBytes().data() < bytes.data() + bytes.size());
}

TEST_CASE("pickle: lists, tuples, dicts and sets from every container opcode", "[pickle]") {
  PickleBytes p;
  p.Proto(4).Op('}');                                                         // the root dict
  p.Str("list").Op(']').Int(1).Op('a').Mark().Int(2).Int(3).Op('e').Op('s');  // SETITEM
  p.Mark();
  p.Str("tuples").Mark().Op(')').Int(1).Op(0x85).Int(1).Int(2).Op(0x86).Int(1).Int(2).Int(3).Op(
      0x87);
  p.Tuple();
  p.Str("old_list").Mark().Int(4).Int(5).Op('l');
  p.Str("old_dict").Mark().Str("k").Int(6).Op('d');
  p.Str("set").Op(0x8f).Mark().Int(7).Int(8).Op(0x90);
  p.Str("frozenset").Mark().Int(9).Op(0x91);
  p.Op('u').Stop();  // SETITEMS
  const PickleDocument doc = Read(p.bytes());
  const PickleValue& root = doc.root();
  REQUIRE(root.Is(Kind::kDict));
  CHECK(root.DictClass().empty());
  CHECK(root.Entries().size() == 6);
  const PickleValue& list = *root.Find("list");
  REQUIRE(list.Items().size() == 3);
  CHECK(list.Items()[2].AsInt() == 3);
  const auto& tuples = root.Find("tuples")->Items();
  REQUIRE(tuples.size() == 4);
  CHECK(tuples[0].Items().empty());
  CHECK(tuples[3].Items().size() == 3);
  CHECK(tuples[3].Is(Kind::kTuple));
  CHECK(root.Find("old_list")->Items()[1].AsInt() == 5);
  CHECK(root.Find("old_dict")->Find("k")->AsInt() == 6);
  CHECK(root.Find("set")->Is(Kind::kSet));
  CHECK(root.Find("set")->Items().size() == 2);
  CHECK(root.Find("frozenset")->Items()[0].AsInt() == 9);
  CHECK(root.Find("missing") == nullptr);
}

TEST_CASE("pickle: memoised containers are shared, even when they hold themselves", "[pickle]") {
  PickleBytes p;
  p.Proto(2).Op(']').Op('q').Little(0, 1);  // a list, memo 0
  p.Op('h').Little(0, 1).Int(1).Op('a');    // GET it and append to the copy on the stack
  p.Op('r').Little(70000, 4);               // LONG_BINPUT under a 4-byte key
  p.Op('j').Little(70000, 4).Op('a');       // the list appended to itself
  p.Raw("p5\n").Raw("g5\n").Op('0');        // text PUT/GET, then POP the extra handle
  p.Stop();
  const PickleDocument doc = Read(p.bytes());
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 2);
  CHECK(items[0].AsInt() == 1);
  CHECK(items[1].node() == doc.root().node());  // the list itself

  PickleBytes m;  // protocol 4's MEMOIZE numbers entries itself
  m.Proto(4)
      .Mark()
      .Str("a")
      .Op(0x94)
      .Str("b")
      .Op(0x94)
      .Op('h')
      .Little(0, 1)
      .Op('h')
      .Little(1, 1)
      .Tuple()
      .Stop();
  const PickleDocument memoised_doc = Read(m.bytes());
  const auto& memoised = memoised_doc.root().Items();
  REQUIRE(memoised.size() == 4);
  CHECK(memoised[2].AsText() == "a");
  CHECK(memoised[3].AsText() == "b");
}

TEST_CASE("pickle: POP, POP_MARK, DUP and FRAME", "[pickle]") {
  PickleBytes p;
  p.Proto(4).Op(0x95).Little(9, 8);        // FRAME: a hint only
  p.Mark().Int(1).Op('2').Int(2).Op('0');  // DUP 1, push 2, POP it
  p.Mark().Int(3).Int(4).Op('1');          // POP_MARK drops 3, 4 and their mark
  p.Tuple().Stop();
  const PickleDocument doc = Read(p.bytes());
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 2);
  CHECK(items[0].AsInt() == 1);
  CHECK(items[1].AsInt() == 1);
}

TEST_CASE("pickle: globals, REDUCE, NEWOBJ and BUILD are recorded as objects", "[pickle]") {
  PickleBytes p;
  p.Proto(4).Mark();
  p.Global("some.module", "Thing").IntTuple({1, 2}).Reduce();
  p.Op('}').Str("state").Int(3).Op('s').Build();
  p.Str("pkg.mod").Str("Cls").Op(0x93).Op(')').Op(0x81);          // STACK_GLOBAL, NEWOBJ
  p.Str("pkg.mod").Str("Cls").Op(0x93).Op(')').Op('}').Op(0x92);  // NEWOBJ_EX, no kwargs
  p.Global("builtins", "print");                                  // a global left as it is
  p.Tuple().Stop();
  const PickleDocument doc = Read(p.bytes());
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 4);
  CHECK(items[0].Is(Kind::kObject));
  CHECK(items[0].QualifiedName() == "some.module.Thing");
  CHECK(items[0].Args().Items()[1].AsInt() == 2);
  REQUIRE(items[0].HasState());
  CHECK(items[0].State().Find("state")->AsInt() == 3);
  CHECK(items[1].QualifiedName() == "pkg.mod.Cls");
  CHECK_FALSE(items[1].HasState());
  CHECK(items[2].QualifiedName() == "pkg.mod.Cls");
  CHECK(items[3].Is(Kind::kGlobal));
  CHECK(items[3].Name() == "print");
}

TEST_CASE("pickle: OrderedDict, latin1 bytes and sets are made as Python makes them", "[pickle]") {
  PickleBytes p;
  p.Proto(2).Mark();
  // torch's state dicts: OrderedDict() then SETITEMS, and BUILD with its _metadata.
  p.Global("collections", "OrderedDict").Op(')').Reduce();
  p.Mark().Str("b").Int(1).Str("a").Int(2).Op('u');
  p.Op('}').Str("_metadata").None().Op('s').Build();
  // Python 2.7's OrderedDict.__reduce__: the items as a list of [key, value] lists.
  p.Global("collections", "OrderedDict").Op(']').Op(']').Py2Str("k").Op('a');
  p.Int(5).Op('a').Op('a').Op(0x85).Reduce();
  // Python 3 at protocol 2: b"\x00\xff" is _codecs.encode("\x00\u00ff", "latin1"); b"" is bytes().
  p.Global("_codecs", "encode").Str(std::string("\x00\xc3\xbf", 3)).Str("latin1").Op(0x86).Reduce();
  p.Global("__builtin__", "bytes").Op(')').Reduce();
  p.Global("builtins", "set").Op(']').Int(7).Op('a').Op(0x85).Reduce();
  p.Tuple().Stop();
  const PickleDocument doc = Read(p.bytes());
  const auto& items = doc.root().Items();
  REQUIRE(items.size() == 5);
  const PickleValue& ordered = items[0];
  REQUIRE(ordered.Is(Kind::kDict));
  CHECK(ordered.DictClass() == "collections.OrderedDict");
  REQUIRE(ordered.Entries().size() == 2);
  CHECK(ordered.Entries()[0].first.AsText() == "b");  // insertion order kept
  CHECK(ordered.Find("a")->AsInt() == 2);
  CHECK(ordered.HasState());
  CHECK(items[1].Find("k")->AsInt() == 5);
  CHECK(items[2].AsBytes() == std::string("\x00\xff", 2));
  CHECK(items[3].AsBytes().empty());
  CHECK(items[4].Is(Kind::kSet));
}

TEST_CASE("pickle: persistent ids need the hook, which sees each id", "[pickle]") {
  PickleBytes p;
  p.Proto(2).Str("storage").Str("0").Op(0x86).Op('Q').Stop();
  CHECK_THAT(ErrorOf(p.bytes()),
             Catch::Contains("test.pkl: pickle opcode 0x51 'Q' (BINPERSID) at offset 15") &&
                 Catch::Contains("only torch.save files"));
  PickleReadOptions options;
  options.source = "x.pth:archive/data.pkl";
  int seen = 0;
  options.on_persistent_id = [&](const PickleValue& id) {
    ++seen;
    CHECK(id.Items()[0].AsText() == "storage");
  };
  const PickleDocument doc = ReadPickle(p.bytes(), options);
  CHECK(seen == 1);
  REQUIRE(doc.root().Is(Kind::kPersistentId));
  CHECK(doc.root().PersistentIdValue().Items()[1].AsText() == "0");

  options.on_persistent_id = [](const PickleValue&) { throw std::runtime_error("not a storage"); };
  CHECK_THAT(
      ErrorOf(p.bytes(), options),
      Catch::Contains("x.pth:archive/data.pkl: pickle opcode 0x51 'Q' (BINPERSID) at offset 15") &&
          Catch::Contains("not a storage"));
  PickleBytes text;  // PERSID: a text id
  text.Proto(2).Raw("Pabc\n").Stop();
  options.on_persistent_id = [](const PickleValue&) {};
  CHECK(ReadPickle(text.bytes(), options).root().PersistentIdValue().AsText() == "abc");
}

TEST_CASE("pickle: several pickles one after another, read from an offset", "[pickle]") {
  PickleBytes p;
  p.Proto(2).Int(1).Stop().Proto(2).Int(2).Stop();
  PickleReadOptions options;
  options.source = "two.pkl";
  const PickleDocument first = ReadPickle(p.bytes(), options);
  CHECK(first.root().AsInt() == 1);
  options.begin = first.end_offset();
  const PickleDocument second = ReadPickle(p.bytes(), options);
  CHECK(second.root().AsInt() == 2);
  CHECK(second.end_offset() == p.bytes().size());
}

TEST_CASE("pickle: what it rejects names the file, the opcode and its offset", "[pickle]") {
  const auto bytes = [](std::string_view literal) { return std::string(literal); };
  using namespace std::string_view_literals;
  CHECK_THAT(ErrorOf(bytes("\x80\x02\xff"sv)),
             Catch::StartsWith("test.pkl: unknown pickle opcode 0xff at offset 2"));
  CHECK_THAT(ErrorOf(bytes("\x80\x06N."sv)),
             Catch::Contains("0x80 (PROTO) at offset 0: protocol 6 is newer than 5"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02X\x10\x00\x00\x00"
                           "abc"sv)),
             Catch::Contains("'X' (BINUNICODE) at offset 2: needs 16 bytes, the input has 3 left"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02N"sv)),
             Catch::Contains("ends at offset 3 before the pickle's STOP"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02."sv)),
             Catch::Contains("'.' (STOP) at offset 2: the stack is empty"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02(0a."sv)),
             Catch::Contains("'a' (APPEND) at offset 4: the stack is empty"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02)K\x01"
                           "a."sv)),
             Catch::Contains("'a' (APPEND) at offset 5: adds items to a tuple of 0, not a list"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02h\x07."sv)),
             Catch::Contains("'h' (BINGET) at offset 2: memo key 7 was never stored"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02K\x01K\x02u."sv)),
             Catch::Contains("'u' (SETITEMS) at offset 6: there is no MARK to pop to"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02(K\x01K\x02K\x03"
                           "d."sv)),
             Catch::Contains("'d' (DICT) at offset 9: has an odd number of keys and values"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02K\x01)R."sv)),
             Catch::Contains("'R' (REDUCE) at offset 5: calls a int 1, not a global"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02K\x01K\x02"
                           "b."sv)),
             Catch::Contains("'b' (BUILD) at offset 6: gives state to a int 1, not an object"));
  CHECK_THAT(
      ErrorOf(bytes("\x80\x02S'abc'\n."sv)),
      Catch::Contains("'S' (STRING) at offset 2: protocol 0 text strings are not supported"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02\x82\x01."sv)),
             Catch::Contains("(EXT1) at offset 2: extension codes"));
  CHECK_THAT(ErrorOf(bytes("\x80\x05\x97."sv)),
             Catch::Contains("(NEXT_BUFFER) at offset 2: out-of-band buffers"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02I12x\n."sv)),
             Catch::Contains("'I' (INT) at offset 2: '12x' is not a decimal"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02"
                           "cmodule_without_newline"sv)),
             Catch::Contains("'c' (GLOBAL) at offset 2: its text argument has no end of line"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02\x95\xff\x00\x00\x00\x00\x00\x00\x00N."sv)),
             Catch::Contains("(FRAME) at offset 2: the frame is longer than the rest"));
  CHECK_THAT(ErrorOf(bytes("\x80\x02K\x01\x8c\x01x\x93."sv)),
             Catch::Contains("(STACK_GLOBAL) at offset 7: the module and name are not both str"));
  PickleBytes utf8;
  utf8.Proto(2).Global("_codecs", "encode").Str("a").Str("utf-8").Op(0x86).Reduce().Stop();
  CHECK_THAT(ErrorOf(utf8.bytes()),
             Catch::Contains("(REDUCE) at offset 29: encodes text as utf-8; only latin1"));
}
