// PNG decoding and PNG/JPEG encoding over libpng and libjpeg (strict_image_codec.h,
// image_encode.h), with OpenCV's own codecs as the independent reference: every PNG colour
// type, bit depth, palette, transparency and interlacing decodes to the pixels
// cv::imdecode(IMREAD_COLOR) gives; JPEG encoding gives cv::imencode's bytes.
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "test/trainer/data/damaged_images.h"
#include "trainer/data/image_encode.h"
#include "trainer/data/strict_image_codec.h"

using namespace mrcnn::data;
using namespace mrcnn::testing;

namespace {

std::span<const uint8_t> Span(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}
std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The PNG forms cv::imencode cannot write (palette, low bit depths, grey+alpha, tRNS,
// Adam7), written with libpng from packed rows. libpng's default error handling aborts the
// test on failure, which is what a test's own encoder should do.
struct RawPng {
  int width = 0, height = 0, bit_depth = 8, colour_type = PNG_COLOR_TYPE_RGB;
  bool interlaced = false;
  std::vector<png_color> palette;
  std::vector<uint8_t> trns;  // palette alphas
  bool grey_trns = false;     // a tRNS grey key (value 0)
  std::vector<std::vector<uint8_t>> rows;
};

void AppendBytes(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

std::vector<uint8_t> WritePng(RawPng& raw) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, AppendBytes, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(raw.width), static_cast<png_uint_32>(raw.height),
               raw.bit_depth, raw.colour_type,
               raw.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!raw.palette.empty()) {
    png_set_PLTE(png, info, raw.palette.data(), static_cast<int>(raw.palette.size()));
  }
  png_color_16 key{};
  if (!raw.trns.empty() || raw.grey_trns) {
    png_set_tRNS(png, info, raw.trns.empty() ? nullptr : raw.trns.data(),
                 static_cast<int>(raw.trns.size()), raw.grey_trns ? &key : nullptr);
  }
  png_write_info(png, info);
  if (raw.bit_depth == 16) {
    png_set_swap(png);  // rows below hold little-endian 16-bit samples
  }
  std::vector<png_bytep> rows;
  for (auto& r : raw.rows) {
    rows.push_back(r.data());
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Rows of `samples_per_row` samples at `bit_depth`, filled from a seeded generator.
RawPng RandomPng(int width, int height, int bit_depth, int colour_type, int samples_per_pixel,
                 int max_value, uint32_t seed) {
  RawPng raw;
  raw.width = width;
  raw.height = height;
  raw.bit_depth = bit_depth;
  raw.colour_type = colour_type;
  cv::RNG rng(seed);
  const size_t bits = static_cast<size_t>(width) * samples_per_pixel * bit_depth;
  for (int y = 0; y < height; ++y) {
    std::vector<uint8_t> row((bits + 7) / 8, 0);
    for (int i = 0; i < width * samples_per_pixel; ++i) {
      const uint32_t v = static_cast<uint32_t>(rng.uniform(0, max_value + 1));
      if (bit_depth == 16) {
        row[2 * static_cast<size_t>(i)] = static_cast<uint8_t>(v & 0xFF);
        row[2 * static_cast<size_t>(i) + 1] = static_cast<uint8_t>(v >> 8);
      } else if (bit_depth == 8) {
        row[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
      } else {
        const size_t bit = static_cast<size_t>(i) * bit_depth;
        row[bit / 8] |= static_cast<uint8_t>(v << (8 - bit_depth - bit % 8));
      }
    }
    raw.rows.push_back(std::move(row));
  }
  return raw;
}

}  // namespace

TEST_CASE("PNG decoding gives OpenCV's pixels for every colour type and depth", "[decode][png]") {
  const cv::Mat bgr = NoisyBgr(61, 37, 3);
  cv::Mat grey, bgra, bgr16, grey16, bgra16;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
  // 16-bit with low bytes that matter for rounding: v*257 + noise.
  bgr.convertTo(bgr16, CV_16UC3, 257.0, 97.0);
  grey.convertTo(grey16, CV_16UC1, 257.0, 200.0);
  cv::cvtColor(bgr16, bgra16, cv::COLOR_BGR2BGRA);
  const std::vector<std::pair<std::string, cv::Mat>> opencv_written = {
      {"8-bit RGB", bgr},    {"8-bit grey", grey},    {"8-bit RGBA", bgra},
      {"16-bit RGB", bgr16}, {"16-bit grey", grey16}, {"16-bit RGBA", bgra16}};
  for (const auto& [name, image] : opencv_written) {
    SECTION(name) {
      const auto png = EncodeImage(image, ".png");
      CHECK(SamePixels(DecodePngRgb(Span(png)), OpenCvRgb(png)));
    }
  }

  struct Case {
    std::string name;
    RawPng raw;
  };
  std::vector<Case> cases;
  for (int depth : {1, 2, 4, 8, 16}) {
    cases.push_back({"grey " + std::to_string(depth) + "-bit",
                     RandomPng(45, 19, depth, PNG_COLOR_TYPE_GRAY, 1, (1 << depth) - 1,
                               static_cast<uint32_t>(depth))});
  }
  for (int depth : {1, 2, 4, 8}) {
    RawPng raw = RandomPng(33, 21, depth, PNG_COLOR_TYPE_PALETTE, 1, (1 << depth) - 1, 40u + depth);
    for (int i = 0; i < (1 << depth); ++i) {
      raw.palette.push_back({static_cast<png_byte>(i * 37), static_cast<png_byte>(255 - i * 11),
                             static_cast<png_byte>(i * 91)});
    }
    raw.trns = {0, 128};  // the first two entries transparent/half: dropped, as OpenCV does
    cases.push_back({"palette " + std::to_string(depth) + "-bit with tRNS", std::move(raw)});
  }
  cases.push_back({"grey+alpha 8-bit", RandomPng(29, 17, 8, PNG_COLOR_TYPE_GRAY_ALPHA, 2, 255, 7)});
  cases.push_back(
      {"grey+alpha 16-bit", RandomPng(29, 17, 16, PNG_COLOR_TYPE_GRAY_ALPHA, 2, 65535, 8)});
  {
    RawPng raw = RandomPng(40, 30, 8, PNG_COLOR_TYPE_GRAY, 1, 255, 9);
    raw.grey_trns = true;
    cases.push_back({"grey with a tRNS key", std::move(raw)});
  }
  {
    RawPng raw = RandomPng(53, 31, 8, PNG_COLOR_TYPE_RGB, 3, 255, 10);
    raw.interlaced = true;
    cases.push_back({"Adam7-interlaced RGB", std::move(raw)});
  }
  {
    RawPng raw = RandomPng(7, 5, 16, PNG_COLOR_TYPE_RGB_ALPHA, 4, 65535, 11);
    raw.interlaced = true;
    cases.push_back({"Adam7-interlaced 16-bit RGBA", std::move(raw)});
  }
  cases.push_back({"1x1 RGB", RandomPng(1, 1, 8, PNG_COLOR_TYPE_RGB, 3, 255, 12)});
  for (auto& c : cases) {
    SECTION(c.name) {
      const auto png = WritePng(c.raw);
      const cv::Mat ours = DecodePngRgb(Span(png));
      CHECK(ours.isContinuous());
      CHECK(SamePixels(ours, OpenCvRgb(png)));
    }
  }
}

TEST_CASE("damaged PNGs are errors", "[decode][png][bad-data]") {
  const auto png = EncodeImage(NoisyBgr(64, 48, 5), ".png");
  SECTION("cut short") {
    CHECK_THROWS_AS(DecodePngRgb(Span(FirstBytes(png, png.size() / 2))), ImageDataError);
  }
  SECTION("corrupt compressed data under a correct CRC") {
    auto bad = png;
    const size_t idat = PngChunkOffset(bad, "IDAT");
    const uint32_t length = BigEndian32(bad.data() + idat);
    for (size_t i = idat + 8 + length / 2; i < idat + 8 + length / 2 + 32; ++i) {
      bad[i] ^= 0x5A;
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), bad.data() + idat + 4, static_cast<uInt>(length) + 4));
    for (int i = 0; i < 4; ++i) {
      bad[idat + 8 + length + static_cast<size_t>(i)] = static_cast<uint8_t>(crc >> (24 - 8 * i));
    }
    CheckPngChunks(Span(bad));  // the structure is intact: only the decoder can tell
    try {
      (void)DecodePngRgb(Span(bad));
      FAIL("decoded corrupt data");
    } catch (const ImageDataError& e) {
      CHECK_THAT(e.what(), Catch::Contains("the PNG image cannot be decoded"));
    }
  }
}

TEST_CASE("JPEG encoding gives OpenCV's bytes", "[encode][jpeg]") {
  for (const auto& size : {cv::Size(64, 48), cv::Size(37, 23), cv::Size(1, 1), cv::Size(300, 7)}) {
    for (int quality : {50, 75, 95, 100}) {
      const cv::Mat bgr = NoisyBgr(size.width, size.height, 21);
      cv::Mat rgb;
      cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
      const std::string ours = EncodeJpegRgb(rgb, quality);
      const auto theirs = EncodeImage(bgr, ".jpg", {cv::IMWRITE_JPEG_QUALITY, quality});
      INFO(size.width << "x" << size.height << " quality " << quality);
      CHECK(std::vector<uint8_t>(ours.begin(), ours.end()) == theirs);
    }
  }
  CHECK(EncodeJpegRgb(cv::Mat(8, 8, CV_8UC3, cv::Scalar(1, 2, 3))) ==
        EncodeJpegRgb(cv::Mat(8, 8, CV_8UC3, cv::Scalar(1, 2, 3)), 95));
  CHECK_THROWS_WITH(EncodeJpegRgb(cv::Mat(8, 8, CV_8UC3), 0),
                    Catch::Contains("quality must be in 1..100"));
  CHECK_THROWS_WITH(EncodeJpegRgb(cv::Mat(8, 8, CV_8UC1)), Catch::Contains("8-bit RGB"));
}

TEST_CASE("PNG encoding is lossless for RGB and grey", "[encode][png]") {
  const cv::Mat bgr = NoisyBgr(70, 41, 22);
  cv::Mat rgb, grey;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  const std::string png = EncodePngRgb(rgb);
  CHECK(SamePixels(DecodePngRgb(Span(png)), rgb));
  CHECK(SamePixels(OpenCvRgb({png.begin(), png.end()}), rgb));
  const std::string grey_png = EncodePngRgb(grey);
  cv::Mat grey_rgb;
  cv::cvtColor(grey, grey_rgb, cv::COLOR_GRAY2RGB);
  CHECK(SamePixels(DecodePngRgb(Span(grey_png)), grey_rgb));
  // A view into a larger image (rows not contiguous) encodes its own pixels only.
  const cv::Mat view = rgb(cv::Rect(5, 3, 20, 11));
  CHECK(SamePixels(DecodePngRgb(Span(EncodePngRgb(view))), view.clone()));
  CHECK_THROWS_WITH(EncodePngRgb(cv::Mat()), Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(EncodePngRgb(cv::Mat(4, 4, CV_16UC3)), Catch::Contains("8-bit"));
}

TEST_CASE("WriteImageFile picks the format by extension", "[encode]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mrcnn_write_image_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  cv::Mat rgb;
  cv::cvtColor(NoisyBgr(32, 24, 23), rgb, cv::COLOR_BGR2RGB);
  auto read = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  WriteImageFile(dir / "a.png", rgb);
  CHECK(SamePixels(DecodePngRgb(Span(read(dir / "a.png"))), rgb));
  WriteImageFile(dir / "b.JPG", rgb);
  CHECK(read(dir / "b.JPG") == EncodeJpegRgb(rgb));
  WriteImageFile(dir / "c.jpeg", rgb);
  CHECK(HasJpegSignature(Span(read(dir / "c.jpeg"))));
  CHECK_THROWS_WITH(WriteImageFile(dir / "d.bmp", rgb),
                    Catch::Contains("d.bmp") && Catch::Contains("use a .png, .jpg or .jpeg"));
  CHECK_THROWS_WITH(WriteImageFile(dir / "missing" / "e.png", rgb),
                    Catch::Contains("cannot write the image file"));
  for (const char* name : {"a.png", "b.JPG", "c.jpeg"}) {
    std::filesystem::remove(dir / name);
  }
  std::filesystem::remove(dir);
}
