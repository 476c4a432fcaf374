// Reads cases {"h","w","polygons":[[x,y,...],...],"box":[x,y,w,h]} (one JSON array on
// stdin) and prints, per case, what the mask API makes of them, for the pycocotools
// oracle test (test/oracle/data/test_rle_oracle.py).
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "trainer/data/mask_rle.h"

int main() {
  using namespace mrcnn::data;
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto cases = nlohmann::json::parse(text);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    const int64_t h = c["h"], w = c["w"];
    nlohmann::json r;
    std::vector<Rle> rles;
    for (const auto& p : c["polygons"]) {
      rles.push_back(RleFromPolygon(p.get<std::vector<double>>(), h, w));
      r["polygons"].push_back(RleCountsToString(rles.back()));
    }
    Rle merged = MergeRles(rles, false);
    Rle inter = MergeRles(rles, true);
    r["merged"] = RleCountsToString(merged);
    r["intersected"] = RleCountsToString(inter);
    r["area"] = RleArea(merged);
    r["bbox"] = RleToBbox(merged);
    auto box = c["box"].get<std::vector<double>>();
    Rle fb = RleFromBox({box[0], box[1], box[2], box[3]}, h, w);
    r["box"] = RleCountsToString(fb);
    // Round trips: string -> counts, and decode -> encode.
    Rle back = RleFromString(r["merged"].get<std::string>(), h, w);
    std::vector<uint8_t> mask = DecodeMask(merged);
    r["roundtrip"] = back == merged && EncodeMask(mask.data(), h, w) == merged;
    r["iou"] = RleIou(rles, {fb}, {false});
    r["iou_crowd"] = RleIou(rles, {fb}, {true});
    out.push_back(r);
  }
  std::cout << out.dump() << "\n";
  return 0;
}
