// Checkpoint files as Detectron2 reads them, on hand-made bytes: numpy arrays in every form
// numpy pickles them, tensors of a torch.save zip (strided views, storages shared), the
// Detectron2 and Caffe2 layouts, and what is refused.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test/trainer/model/weights/pickle_bytes.h"
#include "trainer/model/weights/detectron2_checkpoint.h"
#include "trainer/model/weights/numpy_array.h"
#include "trainer/model/weights/pickle_reader.h"
#include "trainer/model/weights/raw_tensor.h"

using namespace mrcnn::model::weights;
using mrcnn::model::weights::test::FloatBytes;
using mrcnn::model::weights::test::PickleBytes;
using mrcnn::model::weights::test::StoredZip;

namespace {

std::vector<double> Values(const RawTensor& tensor) {
  std::vector<double> out;
  for (int64_t i = 0; i < tensor.NumElements(); ++i)
    out.push_back(tensor.ElementAsDouble(i));
  return out;
}

RawTensor ArrayOf(const PickleBytes& p) {
  PickleReadOptions options;
  options.source = "array.pkl";
  const std::string bytes = p.bytes();
  const PickleDocument doc = ReadPickle(bytes, options);
  REQUIRE(IsNumpyArray(doc.root()));
  return NumpyArrayToRawTensor(doc.root());
}

std::string ErrorOf(const std::string& bytes, const std::string& source) {
  try {
    ReadCheckpointBytes(bytes, source);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  FAIL("no error");
  return "";
}

// A torch.save data.pkl: {"model": OrderedDict(w=<view>, h=<fp16>), "iteration": 7}; w is a
// (3, 2) view with stride (1, 3) of a 6-float storage (a transposed 2x3 tensor), h an fp16
// storage's two elements from offset 1.
std::string TorchDataPickle() {
  PickleBytes p;
  p.Proto(2).Op('}').Str("model").Global("collections", "OrderedDict").Op(')').Reduce().Mark();
  p.Str("w").Global("torch._utils", "_rebuild_tensor_v2").Mark();
  p.Mark()
      .Str("storage")
      .Global("torch", "FloatStorage")
      .Str("0")
      .Str("cpu")
      .Int(6)
      .Tuple()
      .Op('Q');
  p.Int(0).IntTuple({3, 2}).IntTuple({1, 3}).Bool(false);
  p.Global("collections", "OrderedDict").Op(')').Reduce().Tuple().Reduce();
  p.Str("h").Global("torch._utils", "_rebuild_tensor_v2").Mark();
  p.Mark().Str("storage").Global("torch", "HalfStorage").Str("1").Str("cpu").Int(3).Tuple().Op('Q');
  p.Int(1).IntTuple({2}).IntTuple({1}).Bool(false);
  p.Global("collections", "OrderedDict").Op(')').Reduce().Tuple().Reduce();
  p.Op('u').Op('s');
  p.Str("iteration").Int(7).Op('s').Stop();
  return p.bytes();
}

std::string TorchZip(uint16_t method = 0) {
  // float16 0, 1.0, -2.0: 0x0000, 0x3c00, 0xc000
  const std::string half("\x00\x00\x00\x3c\x00\xc0", 6);
  return StoredZip({{"archive/data.pkl", TorchDataPickle()},
                    {"archive/byteorder", "little"},
                    {"archive/data/0", FloatBytes({0, 1, 2, 3, 4, 5})},
                    {"archive/data/1", half},
                    {"archive/version", "3\n"}},
                   method);
}

}  // namespace

TEST_CASE("numpy: Python 2 pickles of arrays, C and Fortran order, both byte orders", "[numpy]") {
  PickleBytes c_order;
  c_order.Proto(2).NumpyArray({2, 3}, "f4", FloatBytes({0, 1, 2, 3, 4, 5})).Stop();
  const RawTensor a = ArrayOf(c_order);
  CHECK(a.dtype == TensorDType::kFloat32);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(Values(a) == std::vector<double>{0, 1, 2, 3, 4, 5});

  PickleBytes fortran;  // column-major data of [[0, 1, 2], [3, 4, 5]]
  fortran.Proto(2).NumpyArray({2, 3}, "f4", FloatBytes({0, 3, 1, 4, 2, 5}), '<', true).Stop();
  CHECK(Values(ArrayOf(fortran)) == std::vector<double>{0, 1, 2, 3, 4, 5});

  PickleBytes big;
  big.Proto(2).NumpyArray({2}, "i4", std::string("\0\0\0\x07\xff\xff\xff\xfe", 8), '>').Stop();
  const RawTensor b = ArrayOf(big);
  CHECK(b.dtype == TensorDType::kInt32);
  CHECK(Values(b) == std::vector<double>{7, -2});

  PickleBytes numpy2;  // numpy 2 names its module numpy._core
  numpy2.Proto(2)
      .NumpyArray({}, "f8", std::string("\0\0\0\0\0\0\xf8\x3f", 8), '<', false,
                  "numpy._core.multiarray")
      .Stop();
  const RawTensor scalar = ArrayOf(numpy2);
  CHECK(scalar.shape.empty());
  CHECK(Values(scalar) == std::vector<double>{1.5});
}

TEST_CASE("numpy: protocol 5's _frombuffer and numpy scalars", "[numpy]") {
  PickleBytes p;
  p.Proto(5).Str("numpy._core.numeric").Str("_frombuffer").Op(0x93).Mark();
  p.Op(0x96).Little(8, 8).Raw(std::string("\x01\0\0\0\0\0\0\0", 8));  // BYTEARRAY8
  p.Global("numpy", "dtype").Str("i8").Bool(false).Bool(true).Op(0x87).Reduce();
  p.IntTuple({1}).Str("C").Tuple().Reduce().Stop();
  const RawTensor a = ArrayOf(p);
  CHECK(a.dtype == TensorDType::kInt64);
  CHECK(Values(a) == std::vector<double>{1});

  PickleBytes s;
  s.Proto(2).Global("numpy.core.multiarray", "scalar");
  s.Global("numpy", "dtype").Py2Str("u1").Bool(false).Bool(true).Op(0x87).Reduce();
  s.Py2Str("\x09").Op(0x86).Reduce().Stop();
  const RawTensor scalar = ArrayOf(s);
  CHECK(scalar.dtype == TensorDType::kUInt8);
  CHECK(Values(scalar) == std::vector<double>{9});
}

TEST_CASE("numpy: arrays that are not tensors, and malformed ones", "[numpy]") {
  PickleBytes object_array;
  object_array.Proto(2).NumpyArray({1}, "O8", std::string(8, '\0')).Stop();
  CHECK_THROWS_AS(ArrayOf(object_array), UnsupportedArrayError);
  PickleBytes short_data;
  short_data.Proto(2).NumpyArray({2, 3}, "f4", FloatBytes({0, 1})).Stop();
  CHECK_THROWS_WITH(ArrayOf(short_data),
                    Catch::Contains("8 bytes, its shape [2, 3] needs 6 elements of 4"));
}

TEST_CASE("strided views are copied out in C order, and checked against their storage",
          "[tensor]") {
  const std::string storage = FloatBytes({0, 1, 2, 3, 4, 5, 6});
  const RawTensor t = CopyStridedView(storage, TensorDType::kFloat32, 1, {3, 2}, {1, 3});
  CHECK(Values(t) == std::vector<double>{1, 4, 2, 5, 3, 6});
  const RawTensor expanded = CopyStridedView(storage, TensorDType::kFloat32, 2, {2, 2}, {0, 1});
  CHECK(Values(expanded) == std::vector<double>{2, 3, 2, 3});
  CHECK(CopyStridedView(storage, TensorDType::kFloat32, 0, {0, 5}, {5, 1}).bytes.empty());
  CHECK_THROWS_WITH(CopyStridedView(storage, TensorDType::kFloat32, 2, {3, 2}, {1, 3}),
                    Catch::Contains("reaches element 7 of a storage of 7"));
  CHECK_THROWS_WITH(CopyStridedView(storage, TensorDType::kFloat32, 0, {2}, {-1}),
                    Catch::Contains("negative"));
}

TEST_CASE("a torch.save zip: OrderedDict state dict, strided and fp16 tensors", "[torch]") {
  const std::string zip = TorchZip();
  const Detectron2Checkpoint checkpoint = ReadCheckpointBytes(zip, "model_final.pth");
  CHECK(checkpoint.container == "torch zip");
  CHECK(checkpoint.origin == CheckpointOrigin::kDetectron2);
  CHECK_FALSE(checkpoint.matching_heuristics);
  REQUIRE(checkpoint.tensors.size() == 2);
  const RawTensor& w = checkpoint.tensors.at("w");
  CHECK(w.shape == std::vector<int64_t>{3, 2});
  CHECK(Values(w) == std::vector<double>{0, 3, 1, 4, 2, 5});
  const RawTensor& h = checkpoint.tensors.at("h");
  CHECK(h.dtype == TensorDType::kFloat16);
  CHECK(Values(h) == std::vector<double>{1, -2});
  CHECK(checkpoint.skipped.empty());  // "iteration" is beside "model", not in it

  CHECK_THAT(
      ErrorOf(TorchZip(8), "model_final.pth"),
      Catch::Contains("model_final.pth: zip entry 'archive/byteorder' is compressed (method 8)") &&
          Catch::Contains("zip -0"));
  std::string truncated = zip.substr(0, zip.size() - 10);
  CHECK_THAT(ErrorOf(truncated, "cut.pth"),
             Catch::StartsWith("cut.pth: not a readable zip archive"));
  const std::string no_storage = StoredZip({{"archive/data.pkl", TorchDataPickle()}});
  CHECK_THAT(ErrorOf(no_storage, "x.pth"),
             Catch::Contains(
                 "x.pth: tensor 'w' (_rebuild_tensor_v2): its storage archive/data/0 is missing"));
}

TEST_CASE("Detectron2's model zoo .pkl and Caffe2's blobs", "[layout]") {
  PickleBytes zoo;
  zoo.Proto(2).Op('}').Mark();
  zoo.Py2Str("model").Op('}').Mark().Py2Str("backbone.bottom_up.stem.conv1.weight");
  zoo.NumpyArray({2}, "f4", FloatBytes({1, 2})).Py2Str("step").Int(3).Op('u');
  zoo.Py2Str("__author__").Py2Str("Detectron2 Model Zoo").Op('u').Stop();
  const Detectron2Checkpoint d2 = ReadCheckpointBytes(zoo.bytes(), "model_final_f10217.pkl");
  CHECK(d2.container == "pickle");
  CHECK(d2.origin == CheckpointOrigin::kDetectron2);
  CHECK(d2.author == "Detectron2 Model Zoo");
  CHECK_FALSE(d2.matching_heuristics);
  REQUIRE(d2.tensors.size() == 1);
  CHECK(d2.tensors.contains("backbone.bottom_up.stem.conv1.weight"));
  REQUIRE(d2.skipped.size() == 1);
  CHECK_THAT(d2.skipped[0], Catch::StartsWith("step (int 3"));

  PickleBytes blobs;
  blobs.Proto(2).Op('}').Py2Str("blobs").Op('}').Mark();
  blobs.Py2Str("conv1_w").NumpyArray({1}, "f4", FloatBytes({1}));
  blobs.Py2Str("conv1_w_momentum").NumpyArray({1}, "f4", FloatBytes({0}));
  blobs.Op('u').Op('s').Stop();
  const Detectron2Checkpoint c2 = ReadCheckpointBytes(blobs.bytes(), "model_final.pkl");
  CHECK(c2.origin == CheckpointOrigin::kCaffe2);
  CHECK(c2.author == "Caffe2");
  CHECK(c2.matching_heuristics);
  CHECK(c2.tensors.size() == 1);  // the optimizer's momentum is dropped
  CHECK(c2.tensors.contains("conv1_w"));

  PickleBytes flat;  // ImageNet backbones: a flat dict
  flat.Proto(2)
      .Op('}')
      .Py2Str("res_conv1_bn_s")
      .NumpyArray({1}, "f4", FloatBytes({1}))
      .Op('s')
      .Stop();
  CHECK(ReadCheckpointBytes(flat.bytes(), "R-50.pkl").origin == CheckpointOrigin::kCaffe2);
}

TEST_CASE("files that are not checkpoints are refused with the file named", "[layout]") {
  CHECK_THAT(ErrorOf("hello", "notes.txt"),
             Catch::StartsWith("notes.txt: neither a torch.save file nor a pickle"));
  PickleBytes list;
  list.Proto(2).Op(']').Stop();
  CHECK_THAT(ErrorOf(list.bytes(), "list.pkl"),
             Catch::StartsWith("list.pkl: holds a list of 0, not a dict of weights"));
  PickleBytes bad_model;
  bad_model.Proto(2).Op('}').Mark().Str("model").Int(1).Str("__author__").Str("me").Op('u').Stop();
  CHECK_THAT(ErrorOf(bad_model.bytes(), "m.pkl"),
             Catch::Contains("m.pkl: its weights (\"model\") are a int 1"));
  PickleBytes broken;
  broken.Proto(2).Op('}').Str("w").NumpyArray({3}, "f4", FloatBytes({1})).Op('s').Stop();
  CHECK_THAT(ErrorOf(broken.bytes(), "b.pkl"),
             Catch::StartsWith("b.pkl: tensor 'w': the array's raw data has 4 bytes"));
  CHECK_THROWS_WITH(ReadCheckpointFile("/nonexistent/model_final.pth"),
                    Catch::StartsWith("/nonexistent/model_final.pth: cannot open"));
}
