// GCC 12 reports a false -Wrestrict on "literal" + std::string (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <catch2/catch.hpp>
#include <string>

#include "trainer/data/coco_dataset.h"

using namespace mrcnn::data;
using Catch::Matchers::Contains;

namespace {

std::string File(const std::string& images, const std::string& annotations,
                 const std::string& categories = R"([{"id": 3, "name": "circle"},
                                                      {"id": 1, "name": "square"}])") {
  return R"({"info": {"x": [1, {"y": null}]}, "images": )" + images + R"(, "annotations": )" +
         annotations + R"(, "categories": )" + categories + "}";
}

const char* kImages = R"([{"id": 10, "file_name": "a.png", "width": 100, "height": 50},
                          {"id": 11, "file_name": "b.png", "width": 100, "height": 50}])";

std::string Ann(int id, int image, int cat, const std::string& bbox,
                const std::string& extra = "") {
  return R"({"id": )" + std::to_string(id) + R"(, "image_id": )" + std::to_string(image) +
         R"(, "category_id": )" + std::to_string(cat) + R"(, "bbox": )" + bbox +
         R"(, "area": 10, "iscrowd": 0)" + extra + "}";
}

}  // namespace

TEST_CASE("a valid file loads with contiguous labels and grouped annotations", "[coco]") {
  auto ds = CocoDataset::Parse(
      File(kImages, "[" + Ann(1, 11, 3, "[1,2,3,4]", R"(, "segmentation": [[1,2,5,2,5,6]])") + "," +
                        Ann(2, 10, 1, "[0,0,10,10]",
                            R"(, "segmentation": {"counts": [0, 5000], "size": [50, 100]})") +
                        "," + Ann(3, 11, 1, "[5,5,5,5]") + "]"),
      "mem.json");
  REQUIRE(ds.images().size() == 2);
  CHECK(ds.NumClasses() == 2);
  CHECK(ds.ClassNames() == std::vector<std::string>{"square", "circle"});
  CHECK(ds.LabelOfCategory(1) == 1);
  CHECK(ds.LabelOfCategory(3) == 2);
  CHECK(ds.CategoryOfLabel(2) == 3);
  CHECK(ds.LabelOfCategory(99) == 0);
  auto a10 = ds.AnnotationsOfImage(static_cast<size_t>(ds.ImageIndex(10)));
  auto a11 = ds.AnnotationsOfImage(static_cast<size_t>(ds.ImageIndex(11)));
  REQUIRE(a10.size() == 1);
  REQUIRE(a11.size() == 2);
  CHECK(a11[0].id == 1);
  CHECK(a11[1].id == 3);
  CHECK(a11[0].label == 2);
  CHECK(std::holds_alternative<CocoPolygons>(a11[0].segmentation));
  CHECK(std::holds_alternative<Rle>(a10[0].segmentation));
  CHECK(ds.report().skipped_annotations == 0);
}

TEST_CASE("structural errors are fatal and name the file", "[coco][bad-data]") {
  CHECK_THROWS_WITH(CocoDataset::Parse("{\"images\": [", "broken.json"),
                    Contains("broken.json:1:") && Contains("malformed JSON"));
  CHECK_THROWS_WITH(CocoDataset::Parse("{\"images\": [}", "broken.json"),
                    Contains("broken.json:1:13"));
  CHECK_THROWS_WITH(CocoDataset::Parse("[1, 2]", "list.json"), Contains("list.json"));
  CHECK_THROWS_WITH(CocoDataset::Parse(R"({"images": {}, "categories": []})", "x.json"),
                    Contains("\"images\" must be an array"));
  CHECK_THROWS_WITH(CocoDataset::Parse(R"({"images": []})", "nocat.json"),
                    Contains("nocat.json") && Contains("categories"));
  CHECK_THROWS_WITH(
      CocoDataset::Parse(File(kImages, "[]", R"([{"id": 1, "name": "a"}, {"id": 1, "name": "b"}])"),
                         "dup.json"),
      Contains("category id 1 appears twice"));
  CHECK_THROWS_WITH(CocoDataset::Load("/nonexistent/instances.json"),
                    Contains("/nonexistent/instances.json"));
  CHECK_THROWS_WITH(CocoDataset::Parse(File(kImages, "[]") + "x", "trail.json"),
                    Contains("after the top-level value"));
}

TEST_CASE("bad annotations are skipped with a count, or fatal on request", "[coco][bad-data]") {
  struct Case {
    std::string ann, why;
  };
  const std::vector<Case> cases = {
      {Ann(7, 10, 42, "[1,1,5,5]"), "category_id 42 is not in"},
      {Ann(7, 99, 1, "[1,1,5,5]"), "image_id 99 is not in"},
      {Ann(7, 10, 1, "[1,1,0,5]"), "zero-area box"},
      {Ann(7, 10, 1, "[200,1,5,5]"), "outside the 100x50 image"},
      {Ann(7, 10, 1, "[1,1,5]"), "\"bbox\" has 3 values"},
      {Ann(7, 10, 1, "\"box\""), "\"bbox\" must be"},
      {Ann(7, 10, 1, "[1,1,5,5]", R"(, "segmentation": [[1,2,3,4]])"), "polygon with 4 values"},
      {Ann(7, 10, 1, "[1,1,5,5]", R"(, "segmentation": {"counts": "~~", "size": [50,100]})"),
       "bad RLE"},
      {Ann(7, 10, 1, "[1,1,5,5]", R"(, "segmentation": {"counts": [3, 4], "size": [50,100]})"),
       "RLE counts cover 7 pixels"},
      {Ann(7, 10, 1, "[1,1,5,5]", R"(, "segmentation": {"counts": [5000], "size": [5,1000]})"),
       "RLE size 5x1000 differs"},
      {R"({"id": 7, "image_id": 10, "bbox": [1,1,5,5]})", "has no \"category_id\""},
      {"42", "must be an object"},
  };
  for (const auto& c : cases) {
    INFO(c.ann);
    const std::string text = File(kImages, "[" + Ann(1, 10, 1, "[1,1,5,5]") + "," + c.ann + "]");
    auto ds = CocoDataset::Parse(text, "bad.json");
    CHECK(ds.annotations().size() == 1);
    CHECK(ds.report().skipped_annotations == 1);
    REQUIRE(ds.report().messages.size() == 1);
    CHECK_THAT(ds.report().messages[0],
               Contains("bad.json") && Contains("annotations[1]") && Contains(c.why));
    CocoLoadOptions fail;
    fail.bad_items = BadItemPolicy::kFail;
    CHECK_THROWS_WITH(CocoDataset::Parse(text, "bad.json", fail),
                      Contains("annotations[1]") && Contains(c.why));
  }
}

TEST_CASE("boxes sticking out of the image are clipped", "[coco][bad-data]") {
  auto ds = CocoDataset::Parse(File(kImages, "[" + Ann(1, 10, 1, "[-5,40,20,20]") + "]"), "c.json");
  REQUIRE(ds.annotations().size() == 1);
  CHECK(ds.annotations()[0].bbox == std::array<double, 4>{0, 40, 15, 10});
  CHECK(ds.report().clipped_boxes == 1);
  // The evaluation view keeps the file as written.
  CocoLoadOptions raw;
  raw.validate_annotations = false;
  auto eval =
      CocoDataset::Parse(File(kImages, "[" + Ann(1, 10, 1, "[-5,40,20,20]") + "]"), "c.json", raw);
  CHECK(eval.annotations()[0].bbox == std::array<double, 4>{-5, 40, 20, 20});
}

TEST_CASE("bad images and empty images", "[coco][bad-data]") {
  const std::string images = R"([{"id": 10, "file_name": "a.png", "width": 100, "height": 50},
                                 {"id": 12, "file_name": "c.png", "height": 50},
                                 {"id": 10, "file_name": "dup.png", "width": 1, "height": 1},
                                 {"id": 11, "file_name": "b.png", "width": 100, "height": 50}])";
  CocoLoadOptions opt;
  opt.drop_images_without_annotations = true;
  auto ds =
      CocoDataset::Parse(File(images, "[" + Ann(1, 10, 1, "[1,1,5,5]") + "]"), "img.json", opt);
  CHECK(ds.report().skipped_images == 2);
  CHECK(ds.report().dropped_empty_images == 1);
  REQUIRE(ds.images().size() == 1);
  CHECK(ds.images()[0].file_name == "a.png");
  CHECK(ds.ImageIndex(11) == -1);
  CHECK_THAT(ds.report().messages[0], Contains("images[1] (id 12)") && Contains("width"));
  CHECK_THAT(ds.report().messages[1], Contains("duplicate image id 10"));
}

TEST_CASE("strings with escapes and numbers in every JSON form", "[coco]") {
  auto ds = CocoDataset::Parse(
      R"({"images": [{"id": 1.0, "file_name": "d\u00e9j\u00e0 \"vu\"\/\ud83d\ude00.png", "width": 1e2, "height": 50}],
          "categories": [{"id": 1, "name": "tab\there"}], "annotations": []})",
      "esc.json");
  CHECK(ds.images()[0].file_name == "d\xc3\xa9j\xc3\xa0 \"vu\"/\xf0\x9f\x98\x80.png");
  CHECK(ds.images()[0].width == 100);
  CHECK(ds.categories()[0].name == "tab\there");
}

TEST_CASE("strings must be valid UTF-8 (found by fuzzing: such a name broke the JSON reports)",
          "[coco][bad-data]") {
  const auto with_name = [](const std::string& name) {
    return R"({"images": [], "annotations": [], "categories": [{"id": 1, "name": ")" + name +
           R"("}]})";
  };
  // Valid multi-byte sequences, raw and after an escape.
  CHECK(CocoDataset::Parse(with_name("caf\xc3\xa9 \xf0\x9f\x98\x80"), "ok.json")
            .categories()[0]
            .name == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(CocoDataset::Parse(with_name("\\t\xe2\x82\xac"), "ok.json").categories()[0].name ==
        "\t\xe2\x82\xac");
  for (const std::string bad :
       {"squar\xe9", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\\tsquar\xe9", "\xe2\x82"}) {
    CHECK_THROWS_WITH(CocoDataset::Parse(with_name(bad), "latin1.json"),
                      Contains("latin1.json:1:") && Contains("invalid UTF-8"));
  }
  CHECK_THROWS_WITH(CocoDataset::Parse(with_name("\\ud800"), "lone.json"),
                    Contains("lone.json:1:") && Contains("surrogate"));
  CHECK_THROWS_WITH(CocoDataset::Parse(with_name("\\ud83d\\u0041"), "lone.json"),
                    Contains("surrogate"));
  CHECK_THROWS_WITH(CocoDataset::Parse(with_name("\\ude00"), "lone.json"), Contains("surrogate"));
}

TEST_CASE("polygons beyond +-2^26 pixels are bad items (found by fuzzing)", "[coco][bad-data]") {
  const std::string text =
      File(kImages,
           "[" + Ann(1, 10, 3, "[1,2,3,4]", R"(, "segmentation": [[1e10,0,50,40,0,40]])") + "," +
               Ann(2, 10, 3, "[1,2,3,4]", R"(, "segmentation": [[-5,0,120,0,50,60]])") + "]");
  for (const bool validate : {true, false}) {
    CocoLoadOptions options;
    options.validate_annotations = validate;
    const auto ds = CocoDataset::Parse(text, "far.json", options);
    REQUIRE(ds.annotations().size() == 1);  // the second one sticks out, as real ones may
    CHECK(ds.annotations()[0].id == 2);
    CHECK(ds.report().skipped_annotations == 1);
    REQUIRE(!ds.report().messages.empty());
    CHECK_THAT(ds.report().messages[0], Contains("annotations[0]") && Contains("2^26"));
  }
}

TEST_CASE("keypoints, their names and skeleton are read; bad ones are skipped", "[coco][keypoints]") {
  const std::string categories = R"([{"id": 1, "name": "person",
      "keypoints": ["left_eye", "right_eye"], "skeleton": [[1, 2]]}])";
  const std::string annotations =
      "[" + Ann(1, 10, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 2, 7, 8, 1], "num_keypoints": 2)") +
      "," + Ann(2, 10, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 2, 7, 8])") +          // not triples
      "," + Ann(3, 10, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 3, 7, 8, 1])") +       // v = 3
      "," + Ann(4, 10, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 2])") +                // 1 of 2
      "," + Ann(5, 11, 1, "[1,2,30,40]", R"(, "keypoints": [0, 0, 0, 0, 0, 0])") + "]";  // none
  const auto ds = CocoDataset::Parse(File(kImages, annotations, categories), "kp.json");
  REQUIRE(ds.categories().size() == 1);
  CHECK(ds.categories()[0].keypoints == std::vector<std::string>{"left_eye", "right_eye"});
  CHECK(ds.categories()[0].skeleton == std::vector<std::array<int64_t, 2>>{{1, 2}});
  REQUIRE(ds.annotations().size() == 2);
  CHECK(ds.annotations()[0].keypoints == std::vector<float>{5, 6, 2, 7, 8, 1});
  CHECK(ds.annotations()[0].num_keypoints == 2);
  CHECK(ds.report().skipped_annotations == 3);
  std::string messages;
  for (const auto& m : ds.report().messages)
    messages += m + "\n";
  CHECK_THAT(messages, Contains("not x, y, v triples") && Contains("visibility 3") &&
                           Contains("1 points, its category names 2"));
  // The evaluation view keeps the file as written (pycocotools judges it).
  CocoLoadOptions as_written;
  as_written.validate_annotations = false;
  CHECK(CocoDataset::Parse(File(kImages, annotations, categories), "kp.json", as_written)
            .annotations()
            .size() == 5);
  CHECK_THROWS_WITH(CocoDataset::Parse(File(kImages, "[]", R"([{"id": 1, "keypoints": "eye"}])"), "k.json"),
                    Contains("\"keypoints\" must be a list of names"));
}

TEST_CASE("images with too few labelled keypoints are dropped for keypoint training", "[coco][keypoints]") {
  const std::string annotations =
      "[" + Ann(1, 10, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 2, 7, 8, 1])") + "," +
      Ann(2, 11, 1, "[1,2,30,40]", R"(, "keypoints": [5, 6, 0, 7, 8, 2])") + "]";
  CocoLoadOptions options;
  options.min_keypoints_per_image = 2;
  const auto ds = CocoDataset::Parse(File(kImages, annotations), "kp.json", options);
  REQUIRE(ds.images().size() == 1);
  CHECK(ds.images()[0].id == 10);
  CHECK(ds.report().dropped_few_keypoint_images == 1);
  CHECK(ds.AnnotationsOfImage(0).size() == 1);
  options.min_keypoints_per_image = 0;
  CHECK(CocoDataset::Parse(File(kImages, annotations), "kp.json", options).images().size() == 2);
}
