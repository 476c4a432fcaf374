#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"

using mrcnn::common::ConfigError;
using mrcnn::engine::TrainConfig;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("engine_config_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path Write(const std::string& name, const std::string& text) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("defaults carry typed Detectron2-style keys", "[config]") {
  TrainConfig c = TrainConfig::Defaults();
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 0.02);
  CHECK(c.GetInt("SOLVER.MAX_ITER") == 90000);
  CHECK(c.GetIntList("SOLVER.STEPS") == mrcnn::engine::IntList{60000, 80000});
  CHECK(c.GetBool("MODEL.MASK_ON"));
  CHECK(c.GetString("SOLVER.LR_SCHEDULER_NAME") == "WarmupMultiStepLR");
  CHECK(c.GetStringList("DATASETS.TRAIN") == mrcnn::engine::StringList{"train"});
  CHECK(c.GetFloatListList("MODEL.ANCHOR_GENERATOR.SIZES").size() == 5);
  CHECK(c.Has("OUTPUT_DIR"));
  CHECK(c.Has("SEED"));
  CHECK_THROWS_AS(c.GetInt("SOLVER.BASE_LR"), ConfigError);
}

TEST_CASE("YAML file overrides, nested and dotted", "[config]") {
  TempDir dir;
  auto file = dir.Write("a.yaml",
                        "SOLVER:\n  BASE_LR: 0.01\n  STEPS: [10, 20]\n  CLIP_GRADIENTS: {ENABLED: true}\n"
                        "MODEL.ROI_HEADS.NUM_CLASSES: 3\nINPUT:\n  MIN_SIZE_TRAIN: 256\n");
  TrainConfig c = TrainConfig::Defaults();
  c.MergeFile(file);
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 0.01);
  CHECK(c.GetIntList("SOLVER.STEPS") == mrcnn::engine::IntList{10, 20});
  CHECK(c.GetBool("SOLVER.CLIP_GRADIENTS.ENABLED"));
  CHECK(c.GetInt("MODEL.ROI_HEADS.NUM_CLASSES") == 3);
  CHECK(c.GetIntList("INPUT.MIN_SIZE_TRAIN") == mrcnn::engine::IntList{256});  // scalar -> one-element list
  CHECK(c.GetInt("SOLVER.MAX_ITER") == 90000);                                 // untouched
}

TEST_CASE("_BASE_ inheritance: base first, child wins, relative to the file, cycles rejected", "[config]") {
  TempDir dir;
  dir.Write("base/Base.yaml", "SOLVER: {BASE_LR: 0.5, MAX_ITER: 7}\nSEED: 3\n");
  dir.Write("base/Mid.yaml", "_BASE_: Base.yaml\nSOLVER: {MAX_ITER: 8}\n");
  auto child = dir.Write("child.yaml", "_BASE_: base/Mid.yaml\nSOLVER: {BASE_LR: 0.25}\n");
  TrainConfig c = TrainConfig::Defaults();
  c.MergeFile(child);
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 0.25);
  CHECK(c.GetInt("SOLVER.MAX_ITER") == 8);
  CHECK(c.GetInt("SEED") == 3);

  dir.Write("x.yaml", "_BASE_: y.yaml\n");
  auto y = dir.Write("y.yaml", "_BASE_: x.yaml\n");
  std::string err = ErrorOf([&] { TrainConfig::Defaults().MergeFile(y); });
  CHECK_THAT(err, Catch::Contains("cycle"));
  CHECK_THAT(err, Catch::Contains("_BASE_"));

  auto missing = dir.Write("m.yaml", "_BASE_: nowhere.yaml\n");
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(missing); }), Catch::Contains("nowhere.yaml"));

  // A _BASE_ the system refuses to look up (a name over NAME_MAX, found by fuzzing) is a
  // ConfigError naming the file, not a std::filesystem exception.
  auto too_long = dir.Write("long.yaml", "_BASE_: " + std::string(300, 'a') + ".yaml\n");
  CHECK_THROWS_AS(TrainConfig::Defaults().MergeFile(too_long), mrcnn::common::ConfigError);
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(too_long); }),
             Catch::Contains("cannot be read: File name too long"));

  // Two _BASE_ keys, the second the file itself (found by fuzzing: the second was followed
  // without the cycle check, recursing until the stack overflowed).
  dir.Write("b2/base.yaml", "SEED: 4\n");
  auto twice = dir.Write("b2/config.yaml", "_BASE_: base.yaml\nSEED: 5\n_BASE_: config.yaml\n");
  const std::string twice_err = ErrorOf([&] { TrainConfig::Defaults().MergeFile(twice); });
  CHECK_THAT(twice_err, Catch::Contains("_BASE_") && Catch::Contains("appears 2 times"));
}

TEST_CASE("unknown keys name the source, the key and the closest valid key", "[config]") {
  TempDir dir;
  auto file = dir.Write("bad.yaml", "SOLVER:\n  BASE_LRR: 0.1\n");
  std::string err = ErrorOf([&] { TrainConfig::Defaults().MergeFile(file); });
  CHECK_THAT(err, Catch::Contains(file.string()));
  CHECK_THAT(err, Catch::Contains("SOLVER.BASE_LRR"));
  CHECK_THAT(err, Catch::Contains("did you mean \"SOLVER.BASE_LR\""));

  auto group = dir.Write("group.yaml", "SOLVR:\n  BASE_LR: 0.1\n");
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(group); }), Catch::Contains("SOLVR"));

  err = ErrorOf([] { TrainConfig::Defaults().MergeOpts({"SOLVER.MAX_ITERS", "10"}); });
  CHECK_THAT(err, Catch::StartsWith("opts:"));
  CHECK_THAT(err, Catch::Contains("SOLVER.MAX_ITER\""));
  // Case differences count for nothing in the suggestion.
  CHECK(mrcnn::engine::ClosestKey("solver.base_lr", {"SOLVER.BASE_LR", "SOLVER.GAMMA"}) == "SOLVER.BASE_LR");
  CHECK(mrcnn::engine::EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("a YAML list or map as a key is a ConfigError naming the file (found by fuzzing)",
          "[config]") {
  TempDir dir;
  const auto top = dir.Write("top.yaml", "[SOLVER.MAX_ITER, 5]: 1\n");
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(top); }),
             Catch::Contains(top.string()) && Catch::Contains("list or map"));
  const auto nested = dir.Write("nested.yaml", "SOLVER:\n  {BASE_LR: 1}: 0.1\n");
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(nested); }),
             Catch::Contains(nested.string()) && Catch::Contains("\"SOLVER\"") &&
                 Catch::Contains("list or map"));
}

TEST_CASE("strings that are not UTF-8 are a ConfigError: ToYaml would change them (fuzzing)",
          "[config]") {
  TempDir dir;
  const auto file = dir.Write("latin1.yaml", "OUTPUT_DIR: /tmp/caf\xe9\n");
  CHECK_THAT(
      ErrorOf([&] { TrainConfig::Defaults().MergeFile(file); }),
      Catch::Contains(file.string()) && Catch::Contains("OUTPUT_DIR") && Catch::Contains("UTF-8"));
  CHECK_THAT(ErrorOf([] {
               TrainConfig::Defaults().MergeOpts({"DATASETS.TRAIN", "[a, \xff]"});
             }),
             Catch::StartsWith("opts:") && Catch::Contains("UTF-8"));
  auto config = TrainConfig::Defaults();
  config.MergeOpts({"OUTPUT_DIR", "/tmp/caf\xc3\xa9"});
  CHECK(config.GetString("OUTPUT_DIR") == "/tmp/caf\xc3\xa9");
}

TEST_CASE("wrongly typed values are rejected with the expected type", "[config]") {
  TempDir dir;
  struct Case {
    std::string yaml;
    std::string key;
    std::string type;
  };
  for (const Case& k : {Case{"SOLVER: {MAX_ITER: 1.5}", "SOLVER.MAX_ITER", "int"},
                        Case{"SOLVER: {BASE_LR: fast}", "SOLVER.BASE_LR", "float"},
                        Case{"SOLVER: {BASE_LR: \"0.1\"}", "SOLVER.BASE_LR", "float"},
                        Case{"MODEL: {MASK_ON: yes}", "MODEL.MASK_ON", "bool"},
                        Case{"SOLVER: {STEPS: [1, b]}", "SOLVER.STEPS", "list of ints"},
                        Case{"DATASETS: {TRAIN: {a: 1}}", "DATASETS.TRAIN", "list of strings"},
                        Case{"MODEL: {ANCHOR_GENERATOR: {SIZES: [32, 64]}}", "MODEL.ANCHOR_GENERATOR.SIZES",
                             "list of lists of floats"},
                        Case{"SOLVER: {LR_SCHEDULER_NAME: [a]}", "SOLVER.LR_SCHEDULER_NAME", "string"}}) {
    auto file = dir.Write("t.yaml", k.yaml);
    std::string err = ErrorOf([&] { TrainConfig::Defaults().MergeFile(file); });
    INFO(k.yaml << " -> " << err);
    CHECK_THAT(err, Catch::Contains(k.key));
    CHECK_THAT(err, Catch::Contains("must be a " + k.type));
  }
  // An int where a float is expected is fine.
  auto ok = dir.Write("ok.yaml", "SOLVER: {BASE_LR: 1, WARMUP_FACTOR: 1e-3}\n");
  TrainConfig c = TrainConfig::Defaults();
  c.MergeFile(ok);
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 1.0);
  CHECK(c.GetFloat("SOLVER.WARMUP_FACTOR") == 1e-3);
  // Not YAML at all.
  auto broken = dir.Write("broken.yaml", "SOLVER: [\n");
  CHECK_THAT(ErrorOf([&] { TrainConfig::Defaults().MergeFile(broken); }), Catch::Contains("not valid YAML"));
}

TEST_CASE("opts: splitting and typed overrides", "[config]") {
  using V = std::vector<std::string>;
  CHECK(TrainConfig::SplitOpts("SOLVER.BASE_LR 0.01  SOLVER.STEPS [10, 20] OUTPUT_DIR 'a b'") ==
        V{"SOLVER.BASE_LR", "0.01", "SOLVER.STEPS", "[10, 20]", "OUTPUT_DIR", "a b"});
  CHECK(TrainConfig::SplitOpts("SOLVER.STEPS (10, 20)") == V{"SOLVER.STEPS", "(10, 20)"});
  CHECK(TrainConfig::SplitOpts(R"(["SOLVER.BASE_LR", "0.01", "SOLVER.STEPS", "[1, 2]"])") ==
        V{"SOLVER.BASE_LR", "0.01", "SOLVER.STEPS", "[1, 2]"});
  CHECK(TrainConfig::SplitOpts("['MODEL.MASK_ON', 'False']") == V{"MODEL.MASK_ON", "False"});
  CHECK(TrainConfig::SplitOpts("   ").empty());
  CHECK_THROWS_AS(TrainConfig::SplitOpts("SOLVER.STEPS [1, 2"), ConfigError);

  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts(TrainConfig::SplitOpts(
      "SOLVER.BASE_LR 0.005 SOLVER.STEPS (100, 200) MODEL.MASK_ON False OUTPUT_DIR 123 "
      "DATASETS.TEST [val] MODEL.ANCHOR_GENERATOR.SIZES [[16], [32]]"));
  CHECK(c.GetFloat("SOLVER.BASE_LR") == 0.005);
  CHECK(c.GetIntList("SOLVER.STEPS") == mrcnn::engine::IntList{100, 200});
  CHECK_FALSE(c.GetBool("MODEL.MASK_ON"));
  CHECK(c.GetString("OUTPUT_DIR") == "123");
  CHECK(c.GetStringList("DATASETS.TEST") == mrcnn::engine::StringList{"val"});
  CHECK(c.GetFloatListList("MODEL.ANCHOR_GENERATOR.SIZES") == mrcnn::engine::FloatListList{{16}, {32}});

  CHECK_THAT(ErrorOf([] { TrainConfig::Defaults().MergeOpts({"SOLVER.BASE_LR"}); }), Catch::Contains("no value"));
  std::string err = ErrorOf([] { TrainConfig::Defaults().MergeOpts({"SOLVER.MAX_ITER", "ten"}); });
  CHECK_THAT(err, Catch::Contains("opts"));
  CHECK_THAT(err, Catch::Contains("SOLVER.MAX_ITER"));
  CHECK_THAT(err, Catch::Contains("must be a int"));
}

TEST_CASE("dump: the resolved config reads back to an equal config", "[config]") {
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"SOLVER.BASE_LR", "0.1", "OUTPUT_DIR", "\"quoted: yes\"", "SOLVER.WARMUP_FACTOR", "0.3333333333333333",
               "MODEL.WEIGHTS", "w.safetensors"});
  std::string text = c.ToYaml();
  CHECK_THAT(text, Catch::Contains("SOLVER:\n"));
  CHECK_THAT(text, Catch::Contains("  BASE_LR: 0.1\n"));
  CHECK_THAT(text, Catch::Contains("  CLIP_GRADIENTS:\n    CLIP_TYPE: \"value\"\n"));
  TrainConfig back = TrainConfig::Defaults();
  back.MergeYaml(YAML::Load(text), "dump", ".");
  CHECK(back == c);
  // Floats keep their type across the dump (1.0 is not written as the int 1).
  CHECK_THAT(text, Catch::Contains("BIAS_LR_FACTOR: 1.0\n"));
  CHECK(c.ToYamlNode()["SOLVER"]["BASE_LR"].as<double>() == 0.1);
}

TEST_CASE("shipped configs load and keep their promises", "[config]") {
  const fs::path configs = fs::path(MRCNN_SOURCE_DIR) / "configs";
  REQUIRE(fs::is_directory(configs));
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(configs)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    TrainConfig c = TrainConfig::Defaults();
    REQUIRE_NOTHROW(c.MergeFile(entry.path()));
    ++count;
  }
  CHECK(count >= 3);

  TrainConfig one_x = TrainConfig::Defaults();
  one_x.MergeFile(configs / "mask_rcnn_R_50_FPN_1x.yaml");
  // Detectron2's 1x: 90k iterations of 16 images, lr 0.02 dropped 10x at 60k and 80k.
  CHECK(one_x.GetInt("SOLVER.MAX_ITER") == 90000);
  CHECK(one_x.GetIntList("SOLVER.STEPS") == mrcnn::engine::IntList{60000, 80000});
  CHECK(one_x.GetInt("SOLVER.IMS_PER_BATCH") == 16);
  CHECK(one_x.GetFloat("SOLVER.BASE_LR") == 0.02);

  TrainConfig cpu = TrainConfig::Defaults();
  cpu.MergeFile(configs / "mask_rcnn_R_50_FPN_shapes_cpu.yaml");
  CHECK(cpu.GetString("MODEL.DEVICE") == "cpu");
  CHECK(cpu.GetInt("INPUT.MAX_SIZE_TRAIN") <= 256);
  CHECK(cpu.GetInt("SOLVER.MAX_ITER") <= 2000);
}
