#include "common/python_encoding.h"

#include <catch2/catch.hpp>

using mrcnn::common::PythonEnvValue;
using mrcnn::common::PythonJsonDumps;
using mrcnn::common::PythonStr;
using nlohmann::json;

TEST_CASE("python json.dumps: compact, sorted, ASCII-only, Python float repr", "[python]") {
  CHECK(PythonJsonDumps(json::parse(R"({"b":1,"a":[true,null,"x"]})")) ==
        R"({"a":[true,null,"x"],"b":1})");
  CHECK(PythonJsonDumps(json(0.001)) == "0.001");
  CHECK(PythonJsonDumps(json(1e-05)) == "1e-05");
  CHECK(PythonJsonDumps(json(0.0001)) == "0.0001");
  CHECK(PythonJsonDumps(json(1e16)) == "1e+16");
  CHECK(PythonJsonDumps(json(1e15)) == "1000000000000000.0");
  CHECK(PythonJsonDumps(json(100.0)) == "100.0");
  CHECK(PythonJsonDumps(json(-2.5)) == "-2.5");
  CHECK(PythonJsonDumps(json(1.5e300)) == "1.5e+300");
  CHECK(PythonJsonDumps(json(-0.0)) == "-0.0");
  CHECK(PythonJsonDumps(json(123456789.125)) == "123456789.125");
  CHECK(PythonJsonDumps(json(-7)) == "-7");
  CHECK(PythonJsonDumps(json("h\xc3\xa9\xf0\x9f\x98\x80")) == R"("h\u00e9\ud83d\ude00")");
  CHECK(PythonJsonDumps(json("a\"b\\c\n\t\x01\x7f")) == R"("a\"b\\c\n\t\u0001\u007f")");
}

TEST_CASE("python str(): the toolkit's argv rendering", "[python]") {
  CHECK(PythonStr(json("raw text")) == "raw text");
  CHECK(PythonStr(json(true)) == "True");
  CHECK(PythonStr(json(false)) == "False");
  CHECK(PythonStr(json(nullptr)) == "None");
  CHECK(PythonStr(json(10)) == "10");
  CHECK(PythonStr(json(0.5)) == "0.5");
  CHECK(PythonStr(json(1e-7)) == "1e-07");
  CHECK(PythonStr(json::parse(R"([1,"a",true,null,[2.0]])")) == "[1, 'a', True, None, [2.0]]");
  CHECK(PythonStr(json::parse(R"({"k":"v","n":1})")) == "{'k': 'v', 'n': 1}");
  CHECK(PythonStr(json::parse(R"(["it's"])")) == R"(["it's"])");
  CHECK(PythonStr(json::parse(R"(["a'b\"c"])")) == R"(['a\'b"c'])");
  CHECK(PythonStr(json::parse(R"(["x\\y\n"])")) == R"(['x\\y\n'])");
  CHECK(PythonStr(json::array({"h\xc3\xa9"})) == "['h\xc3\xa9']");
}

TEST_CASE("python env values: null empty, strings raw, the rest JSON", "[python]") {
  CHECK(PythonEnvValue(json(nullptr)).empty());
  CHECK(PythonEnvValue(json("h\xc3\xa9")) == "h\xc3\xa9");
  CHECK(PythonEnvValue(json(false)) == "false");
  CHECK(PythonEnvValue(json::array({"algo-1", "algo-2"})) == R"(["algo-1","algo-2"])");
}
