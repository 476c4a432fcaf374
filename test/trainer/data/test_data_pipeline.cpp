#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "test/trainer/data/damaged_images.h"
#include "test/trainer/remove_tree.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/image_decode.h"
#include "trainer/data/sampler.h"
#include "trainer/data/synthetic_shapes.h"
#include "trainer/data/transforms.h"

using namespace mrcnn::data;
namespace fs = std::filesystem;

namespace {

using mrcnn::test::RemoveTree;

fs::path TempDir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("mrcnn_data_test_" + name + "_" + std::to_string(::getpid()));
  RemoveTree(p);
  fs::create_directories(p);
  return p;
}

// Tight box of a 0/1 mask: x0, y0, x1, y1 (exclusive ends).
std::array<int, 4> MaskBounds(const cv::Mat& m) {
  cv::Rect r = cv::boundingRect(m);
  return {r.x, r.y, r.x + r.width, r.y + r.height};
}

}  // namespace

TEST_CASE("resize and flip keep boxes, masks and pixels aligned", "[transforms]") {
  // 120x80 image, a red rectangle x 20..60, y 10..40 (exclusive), as polygon and as RLE.
  cv::Mat rgb(80, 120, CV_8UC3, cv::Scalar(0, 0, 0));
  cv::rectangle(rgb, cv::Rect(20, 10, 40, 30), cv::Scalar(255, 0, 0), cv::FILLED);
  CocoImage im{1, "x.png", 120, 80};
  CocoAnnotation poly;
  poly.bbox = {20, 10, 40, 30};
  poly.label = 1;
  poly.segmentation = CocoPolygons{{20, 10, 60, 10, 60, 40, 20, 40}};
  CocoAnnotation rle = poly;
  std::vector<uint8_t> bits(80 * 120, 0);
  for (int y = 10; y < 40; ++y) {
    for (int x = 20; x < 60; ++x)
      bits[y * 120 + x] = 1;
  }
  rle.segmentation = EncodeMask(bits.data(), 80, 120);
  CocoAnnotation crowd = poly;
  crowd.iscrowd = true;
  std::vector<CocoAnnotation> anns{poly, rle, crowd};
  for (double flip : {0.0, 1.0}) {
    for (int64_t size : {80, 160, 200}) {
      TransformSpec spec;
      spec.min_sizes = {size};
      spec.max_size = 250;
      spec.training = true;
      spec.flip_probability = flip;
      std::mt19937_64 rng(1);
      InstanceSample s = TransformInstances(rgb, im, anns, spec, rng);
      INFO("flip " << flip << " size " << size);
      CHECK(s.flipped == (flip == 1.0));
      REQUIRE(s.boxes.size() == 2);  // the crowd region is left out
      const auto [H, W] = ResizedSize(80, 120, size, 250);
      CHECK(s.image.rows == H);
      CHECK(s.image.cols == W);
      CHECK(std::max(H, W) <= 250);
      for (size_t k = 0; k < 2; ++k) {
        const auto& b = s.boxes[k];
        auto mb = MaskBounds(s.masks[k]);
        CHECK(std::abs(mb[0] - b[0]) <= 1.0);
        CHECK(std::abs(mb[1] - b[1]) <= 1.0);
        CHECK(std::abs(mb[2] - b[2]) <= 1.0);
        CHECK(std::abs(mb[3] - b[3]) <= 1.0);
        // Pixels inside the (eroded) mask are the rectangle's red.
        cv::Mat inner;
        cv::erode(s.masks[k], inner, cv::Mat::ones(3, 3, CV_8U));
        cv::Scalar mean = cv::mean(s.image, inner);
        CHECK(mean[0] > 240);
        CHECK(mean[1] < 15);
      }
      // Polygon and RLE paths agree.
      cv::Mat diff;
      cv::absdiff(s.masks[0], s.masks[1], diff);
      CHECK(cv::countNonZero(diff) <= 2 * (H + W) / 10 + 4);
      if (flip == 1.0) {
        CHECK(s.boxes[0][0] == Approx(W - 60 * s.scale_x));
      } else {
        CHECK(s.boxes[0][0] == Approx(20 * s.scale_x));
      }
    }
  }
}

TEST_CASE("multi-scale training picks sizes from the list, test uses the last", "[transforms]") {
  cv::Mat rgb(100, 200, CV_8UC3, cv::Scalar(1, 2, 3));
  CocoImage im{1, "x.png", 200, 100};
  TransformSpec spec;
  spec.min_sizes = {64, 96, 128};
  spec.max_size = 1000;
  spec.training = true;
  std::set<int> heights;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50; ++i)
    heights.insert(TransformInstances(rgb, im, {}, spec, rng).image.rows);
  CHECK(heights == std::set<int>{64, 96, 128});
  spec.training = false;
  CHECK(TransformInstances(rgb, im, {}, spec, rng).image.rows == 128);
}

TEST_CASE("distributed sampler: disjoint shards, full cover, deterministic epochs", "[sampler]") {
  const size_t n = 103;
  for (int64_t world : {1, 2, 4, 8}) {
    std::multiset<size_t> all;
    for (int64_t r = 0; r < world; ++r) {
      DistributedSampler s(n, r, world, 42);
      auto idx = s.EpochIndices(3);
      CHECK(idx.size() == (n + world - 1) / world);
      CHECK(idx == DistributedSampler(n, r, world, 42).EpochIndices(3));
      CHECK(idx != s.EpochIndices(4));
      CHECK(idx != DistributedSampler(n, r, world, 43).EpochIndices(3));
      all.insert(idx.begin(), idx.end());
    }
    std::set<size_t> unique(all.begin(), all.end());
    CHECK(unique.size() == n);                             // every image is seen
    CHECK(all.size() - n == (world - n % world) % world);  // padding only
  }
  // Fixed values so a change of the permutation (which would change training) is noticed.
  CHECK(SeededPermutation(5, 7) == SeededPermutation(5, 7));
  auto unshuffled = DistributedSampler(10, 1, 3, 0, false).EpochIndices(0);
  CHECK(unshuffled == std::vector<size_t>{1, 4, 7, 0});
  CHECK_THROWS_AS(DistributedSampler(10, 3, 3, 0), std::invalid_argument);
}

TEST_CASE("aspect-ratio grouping gives same-orientation batches", "[sampler]") {
  std::vector<uint8_t> portrait{0, 1, 0, 1, 1, 0, 0};
  AspectRatioGrouper g(portrait, 2);
  std::vector<std::vector<size_t>> batches;
  for (size_t i = 0; i < portrait.size(); ++i) {
    auto b = g.Push(i);
    if (!b.empty())
      batches.push_back(b);
  }
  REQUIRE(batches.size() == 3);
  for (const auto& b : batches)
    CHECK(portrait[b[0]] == portrait[b[1]]);
}

TEST_CASE("decoding: grayscale, alpha, JPEG, missing and corrupt files", "[decode][bad-data]") {
  const fs::path dir = TempDir("decode");
  cv::Mat gray(4, 5, CV_8UC1, cv::Scalar(77));
  cv::imwrite((dir / "g.png").string(), gray);
  cv::Mat bgra(4, 5, CV_8UC4, cv::Scalar(10, 20, 30, 0));
  cv::imwrite((dir / "a.png").string(), bgra);
  cv::Mat bgr(16, 16, CV_8UC3, cv::Scalar(200, 100, 50));
  cv::imwrite((dir / "c.jpg").string(), bgr);
  std::ofstream(dir / "bad.jpg") << "not an image";
  cv::Mat g = DecodeImageRgb(dir / "g.png");
  CHECK(g.type() == CV_8UC3);
  CHECK(g.at<cv::Vec3b>(1, 1) == cv::Vec3b(77, 77, 77));
  cv::Mat a = DecodeImageRgb(dir / "a.png");
  CHECK(a.type() == CV_8UC3);
  CHECK(a.at<cv::Vec3b>(0, 0) == cv::Vec3b(30, 20, 10));  // RGB order
  cv::Mat c = DecodeImageRgb(dir / "c.jpg");
  CHECK(std::abs(c.at<cv::Vec3b>(8, 8)[0] - 50) < 4);
  CHECK_THROWS_WITH(DecodeImageRgb(dir / "missing.png"), Catch::Contains("missing.png"));
  CHECK_THROWS_WITH(DecodeImageRgb(dir / "bad.jpg"),
                    Catch::Contains("bad.jpg: not a JPEG or PNG file"));
  // Formats other than JPEG and PNG are refused by name, not decoded by accident.
  cv::imwrite((dir / "b.bmp").string(), bgr);
  CHECK_THROWS_WITH(DecodeImageRgb(dir / "b.bmp"),
                    Catch::Contains("b.bmp: not a JPEG or PNG file") &&
                        Catch::Contains("convert the image to JPEG or PNG"));
  RemoveTree(dir);
}

TEST_CASE("decoding: truncated or corrupt JPEG and PNG files are errors naming the file",
          "[decode][bad-data]") {
  using namespace mrcnn::testing;
  const fs::path dir = TempDir("decode_damaged");
  const cv::Mat noisy = NoisyBgr(96, 64, 6);
  const auto jpeg = EncodeImage(noisy, ".jpg");
  const auto png = EncodeImage(noisy, ".png");
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return dir / name;
  };
  // Intact files give what cv::imread gave before.
  for (const auto& path : {write("ok.jpg", jpeg), write("ok.png", png)}) {
    cv::Mat expected;
    cv::cvtColor(cv::imread(path.string(), cv::IMREAD_UNCHANGED), expected, cv::COLOR_BGR2RGB);
    CHECK(cv::norm(DecodeImageRgb(path), expected, cv::NORM_INF) == 0);
  }
  CHECK_THROWS_WITH(DecodeImageRgb(write("cut.jpg", FirstBytes(jpeg, 700))),
                    Catch::Contains("cut.jpg: the JPEG data is truncated or corrupt: Premature "
                                    "end of JPEG file"));
  CHECK_THROWS_WITH(DecodeImageRgb(write("noise.jpg", NoiseOverMiddle(jpeg))),
                    Catch::Contains("noise.jpg: the JPEG data is truncated or corrupt: Corrupt "
                                    "JPEG data"));
  CHECK_THROWS_WITH(DecodeImageRgb(write("crc.png", FlipPngCrcByte(png, "IDAT"))),
                    Catch::Contains("crc.png: the PNG data is corrupt: CRC mismatch in the IDAT"));
  CHECK_THROWS_WITH(DecodeImageRgb(write("cut.png", FirstBytes(png, png.size() - 12))),
                    Catch::Contains("cut.png: the PNG data is truncated"));
  RemoveTree(dir);
}

TEST_CASE("loader: a truncated JPEG in a COCO dataset is a skipped, counted item",
          "[loader][bad-data]") {
  const fs::path dir = TempDir("loader_truncated_jpeg");
  ShapesOptions so;
  so.output = dir;
  so.train_images = 6;
  so.val_images = 1;
  so.seed = 3;
  so.image_size = 96;
  so.format = "jpg";
  WriteShapesDataset(so);
  auto ds = std::make_shared<const CocoDataset>(
      CocoDataset::Load(dir / "annotations" / "instances_train.json"));
  REQUIRE(ds->images().size() == 6);
  // The first 700 bytes of a valid JPEG: headers intact, most of the scan missing. Before,
  // libjpeg filled in the rest and the loader trained on it.
  const fs::path victim = dir / "train" / ds->images()[2].file_name;
  REQUIRE(fs::file_size(victim) > 700);
  REQUIRE(::truncate(victim.c_str(), 700) == 0);
  LoaderOptions lo;
  lo.image_root = dir / "train";
  lo.batch_size = 2;
  lo.num_workers = 2;
  lo.training = false;
  lo.transform.min_sizes = {96};
  lo.transform.max_size = 96;
  {
    DataLoader loader(ds, lo);
    std::vector<int64_t> ids;
    while (auto b = loader.Next()) {
      ids.insert(ids.end(), b->image_ids.begin(), b->image_ids.end());
    }
    CHECK(ids.size() == 5);
    CHECK(std::find(ids.begin(), ids.end(), ds->images()[2].id) == ids.end());
    CHECK(loader.skipped_images() == 1);
  }
  {
    LoaderOptions o = lo;
    o.bad_images = BadItemPolicy::kFail;
    DataLoader loader(ds, o);
    auto drain = [&] {
      while (loader.Next()) {
      }
    };
    CHECK_THROWS_WITH(drain(), Catch::Contains(ds->images()[2].file_name) &&
                                   Catch::Contains("the JPEG data is truncated or corrupt") &&
                                   Catch::Contains("bad_images policy is 'fail'"));
  }
  RemoveTree(dir);
}

TEST_CASE("loader: padding, determinism across workers, evaluation pass, bad images",
          "[loader][bad-data]") {
  const fs::path dir = TempDir("loader");
  ShapesOptions so;
  so.output = dir;
  so.train_images = 12;
  so.val_images = 5;
  so.seed = 9;
  so.image_size = 100;
  WriteShapesDataset(so);
  auto ds = std::make_shared<const CocoDataset>(
      CocoDataset::Load(dir / "annotations" / "instances_train.json"));
  REQUIRE(ds->images().size() == 12);
  LoaderOptions lo;
  lo.image_root = dir / "train";
  lo.batch_size = 3;
  lo.transform.min_sizes = {96, 128};
  lo.transform.max_size = 200;
  lo.transform.flip_probability = 0.5;
  lo.seed = 5;
  auto collect = [&](int workers, int n) {
    LoaderOptions o = lo;
    o.num_workers = workers;
    DataLoader loader(ds, o);
    std::vector<Batch> out;
    for (int i = 0; i < n; ++i)
      out.push_back(*loader.Next());
    return out;
  };
  auto one = collect(1, 10);  // 10 batches of 3 = 2.5 epochs: the iterator is infinite
  auto three = collect(3, 10);
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(one[i].images.size(2) % 32 == 0);
    CHECK(one[i].images.size(3) % 32 == 0);
    CHECK(one[i].image_ids == three[i].image_ids);
    CHECK(torch::equal(one[i].images, three[i].images));
    for (size_t k = 0; k < one[i].targets.size(); ++k) {
      const auto& t = one[i].targets[k];
      CHECK(torch::equal(t.boxes, three[i].targets[k].boxes));
      CHECK(t.masks.size(1) == one[i].image_sizes[k][0]);
      CHECK(t.masks.size(2) == one[i].image_sizes[k][1]);
      CHECK(t.labels.min().item<int64_t>() >= 1);
      CHECK(t.labels.max().item<int64_t>() <= 3);
    }
  }
  // Evaluation pass: every image once, in order, the last batch partial.
  {
    LoaderOptions o = lo;
    o.training = false;
    DataLoader loader(ds, o);
    std::vector<int64_t> ids;
    while (auto b = loader.Next())
      ids.insert(ids.end(), b->image_ids.begin(), b->image_ids.end());
    std::vector<int64_t> want;
    for (const auto& im : ds->images())
      want.push_back(im.id);
    CHECK(ids == want);
  }
  // A missing and a corrupt image are skipped and counted; or fatal on request.
  fs::remove(dir / "train" / ds->images()[0].file_name);
  std::ofstream(dir / "train" / ds->images()[1].file_name) << "garbage";
  {
    LoaderOptions o = lo;
    o.training = false;
    DataLoader loader(ds, o);
    int64_t seen = 0;
    while (auto b = loader.Next())
      seen += static_cast<int64_t>(b->image_ids.size());
    CHECK(seen == 10);
    CHECK(loader.skipped_images() == 2);
  }
  {
    LoaderOptions o = lo;
    o.training = false;
    o.bad_images = BadItemPolicy::kFail;
    DataLoader loader(ds, o);
    CHECK_THROWS_WITH(loader.Next(), Catch::Contains(ds->images()[0].file_name));
  }
  RemoveTree(dir);
}
