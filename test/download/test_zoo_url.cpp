// MODEL.WEIGHTS values to the URLs Detectron2 fetches them from, the mirror, the catalog, and
// the md5 prefix in zoo file names.
#include <catch2/catch.hpp>

#include "download/md5_name.h"
#include "download/zoo_url.h"

namespace mrcnn::download {

TEST_CASE("detectron2:// names a file in Detectron2's bucket", "[download]") {
  CHECK(WeightsUrl("detectron2://ImageNetPretrained/MSRA/R-50.pkl", "") ==
        "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl");
  CHECK(WeightsUrl("detectron2://COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x/137849600/"
                   "model_final_f10217.pkl",
                   "") ==
        "https://dl.fbaipublicfiles.com/detectron2/COCO-InstanceSegmentation/"
        "mask_rcnn_R_50_FPN_3x/137849600/model_final_f10217.pkl");
  CHECK_THROWS_AS(WeightsUrl("detectron2://", ""), std::invalid_argument);
}

TEST_CASE("catalog:// names Detectron1's bucket, by Detectron2's table", "[download]") {
  const std::string d1 = "https://dl.fbaipublicfiles.com/detectron/ImageNetPretrained/";
  CHECK(WeightsUrl("catalog://ImageNetPretrained/MSRA/R-50", "") == d1 + "MSRA/R-50.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/MSRA/R-101", "") == d1 + "MSRA/R-101.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/R-50-GN", "") == d1 + "47261647/R-50-GN.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/R-101-GN", "") ==
        d1 + "47592356/R-101-GN.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/X-101-32x8d", "") ==
        d1 + "20171220/X-101-32x8d.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/X-101-64x4d", "") ==
        d1 + "FBResNeXt/X-101-64x4d.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/X-152-32x8d-IN5k", "") ==
        d1 + "25093814/X-152-32x8d-IN5k.pkl");
  CHECK(CatalogNames().size() == 7);
  try {
    WeightsUrl("catalog://ImageNetPretrained/FAIR/R-18", "");
    FAIL("an unknown catalog name was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("catalog://ImageNetPretrained/FAIR/R-18") &&
                             Catch::Contains("catalog://ImageNetPretrained/MSRA/R-50, ") &&
                             Catch::Contains("catalog://ImageNetPretrained/FAIR/X-152-32x8d-IN5k"));
  }
  CHECK_THROWS_AS(WeightsUrl("catalog://Caffe2Detectron/COCO/137849600/e2e_mask_rcnn", ""),
                  std::invalid_argument);
}

TEST_CASE("URLs are taken as they are, paths are not URLs, gs:// is refused", "[download]") {
  CHECK(WeightsUrl("https://example.com/a/b.pth?x=1", "") == "https://example.com/a/b.pth?x=1");
  CHECK(WeightsUrl("http://10.0.0.1:8080/w.pkl", "") == "http://10.0.0.1:8080/w.pkl");
  CHECK(WeightsUrl("s3://bucket/zoo/R-50.pkl", "") == "s3://bucket/zoo/R-50.pkl");
  CHECK_FALSE(WeightsUrl("/opt/ml/input/data/weights/R-50.pkl", "").has_value());
  CHECK_FALSE(WeightsUrl("R-50.pkl", "").has_value());
  CHECK_FALSE(WeightsUrl("", "").has_value());
  CHECK_THROWS_WITH(WeightsUrl("gs://bucket/R-50.pkl", ""), Catch::Contains("gs://"));
}

TEST_CASE("MRCNN_ZOO_MIRROR replaces the zoo's prefix in every zoo URL", "[download]") {
  CHECK(WeightsUrl("detectron2://ImageNetPretrained/MSRA/R-50.pkl", "s3://my-bucket/zoo/") ==
        "s3://my-bucket/zoo/detectron2/ImageNetPretrained/MSRA/R-50.pkl");
  CHECK(WeightsUrl("catalog://ImageNetPretrained/FAIR/R-50-GN", "https://127.0.0.1:8443") ==
        "https://127.0.0.1:8443/detectron/ImageNetPretrained/47261647/R-50-GN.pkl");
  CHECK(WeightsUrl("https://dl.fbaipublicfiles.com/detectron2/x.pkl", "http://m/") ==
        "http://m/detectron2/x.pkl");
  // Only the zoo's own host is mirrored.
  CHECK(WeightsUrl("https://example.com/detectron2/x.pkl", "http://m/") ==
        "https://example.com/detectron2/x.pkl");
  CHECK(ApplyZooMirror("https://dl.fbaipublicfiles.com/detectron2/x.pkl", "") ==
        "https://dl.fbaipublicfiles.com/detectron2/x.pkl");
}

TEST_CASE("zoo file names carry the start of their md5", "[download]") {
  CHECK(Md5PrefixInName("model_final_f10217.pkl") == "f10217");
  CHECK(Md5PrefixInName("model_0039999_e76410.pkl") == "e76410");
  CHECK(Md5PrefixInName("model_final_c18079783c55a94968edc28b7101c5f0.pkl") ==
        "c18079783c55a94968edc28b7101c5f0");
  CHECK_FALSE(Md5PrefixInName("R-50.pkl").has_value());
  CHECK_FALSE(Md5PrefixInName("model_final.pth").has_value());
  CHECK_FALSE(Md5PrefixInName("model_final_r101_c4.pkl").has_value());
  CHECK_FALSE(
      Md5PrefixInName("model_final_F10217.pkl").has_value());  // Detectron2 writes lower case
  CHECK_FALSE(Md5PrefixInName("model_final_f1021.pkl").has_value());  // too short to mean it
  CHECK_FALSE(Md5PrefixInName("model_final_f10217.pth").has_value());
  CHECK(Md5MatchesPrefix("f10217aaaaaaaaaaaaaaaaaaaaaaaaaa", "f10217"));
  CHECK_FALSE(Md5MatchesPrefix("f10218aaaaaaaaaaaaaaaaaaaaaaaaaa", "f10217"));
  CHECK_FALSE(Md5MatchesPrefix("f10217aaaaaaaaaaaaaaaaaaaaaaaaaa", ""));
}

}  // namespace mrcnn::download
