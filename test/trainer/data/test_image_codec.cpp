// Strict JPEG/PNG decoding (trainer/data/strict_image_codec): intact files give exactly
// OpenCV's pixels, truncated or corrupt ones are ImageDataError saying what is wrong.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <opencv2/imgproc.hpp>
// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "test/trainer/data/damaged_images.h"
#include "trainer/data/strict_image_codec.h"

using namespace mrcnn::data;
using namespace mrcnn::testing;

namespace {

// A 4-component JPEG stored as `stored` (JCS_CMYK or JCS_YCCK): OpenCV cannot write one.
std::vector<uint8_t> EncodeCmykJpeg(const cv::Mat& cmyk, J_COLOR_SPACE stored) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);  // exits on error: fine for a test's own encoder
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(cmyk.cols);
  cinfo.image_height = static_cast<JDIMENSION>(cmyk.rows);
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, stored);
  jpeg_set_quality(&cinfo, 90, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(cmyk.ptr<uint8_t>(static_cast<int>(cinfo.next_scanline)));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + size);
  std::free(out);
  jpeg_destroy_compress(&cinfo);
  return bytes;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ImageDataError& e) {
    return e.what();
  }
  return "(no ImageDataError)";
}

}  // namespace

TEST_CASE("strict JPEG decoding gives OpenCV's pixels for intact files", "[decode][jpeg]") {
  const cv::Mat noisy = NoisyBgr(101, 67, 7);  // odd sizes: partial MCUs at the edges
  std::vector<std::pair<std::string, std::vector<uint8_t>>> files = {
      {"baseline q90", EncodeImage(noisy, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90})},
      {"baseline q100", EncodeImage(noisy, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 100})},
      {"progressive", EncodeImage(noisy, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1})},
      {"restart markers", EncodeImage(noisy, ".jpg", {cv::IMWRITE_JPEG_RST_INTERVAL, 2})},
  };
  cv::Mat gray;
  cv::cvtColor(noisy, gray, cv::COLOR_BGR2GRAY);
  files.emplace_back("grayscale", EncodeImage(gray, ".jpg"));
  cv::Mat cmyk(noisy.rows, noisy.cols, CV_8UC4);
  cv::RNG(3).fill(cmyk, cv::RNG::UNIFORM, 0, 256);
  files.emplace_back("CMYK", EncodeCmykJpeg(cmyk, JCS_CMYK));
  files.emplace_back("YCCK", EncodeCmykJpeg(cmyk, JCS_YCCK));
  auto trailing = files[0].second;
  trailing.insert(trailing.end(), {0x00, 0x01, 0x02});
  files.emplace_back("bytes after EOI", trailing);
  for (const auto& [name, bytes] : files) {
    DYNAMIC_SECTION(name) {
      const cv::Mat rgb = DecodeJpegRgb(bytes);
      CHECK(rgb.type() == CV_8UC3);
      CHECK(rgb.isContinuous());
      CHECK(rgb.cols == 101);
      CHECK(rgb.rows == 67);
      CHECK(SamePixels(rgb, OpenCvRgb(bytes)));
    }
  }
}

TEST_CASE("truncated or corrupt JPEGs are errors, not filled-in images",
          "[decode][jpeg][bad-data]") {
  const auto jpeg = EncodeImage(NoisyBgr(128, 96, 1), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  REQUIRE(jpeg.size() > 4000);
  REQUIRE_NOTHROW(DecodeJpegRgb(jpeg));

  SECTION("the first 700 bytes") {
    const auto cut = FirstBytes(jpeg, 700);
    // The bug: OpenCV alone decodes it, the missing part filled in.
    CHECK_FALSE(cv::imdecode(cut, cv::IMREAD_COLOR).empty());
    CHECK(ErrorOf([&] { DecodeJpegRgb(cut); }) ==
          "the JPEG data is truncated or corrupt: Premature end of JPEG file");
  }
  SECTION("cut anywhere in the scan, or just before EOI") {
    for (size_t n : {jpeg.size() / 4, jpeg.size() / 2, jpeg.size() * 9 / 10, jpeg.size() - 2}) {
      INFO("first " << n << " of " << jpeg.size() << " bytes");
      CHECK_THAT(ErrorOf([&] { DecodeJpegRgb(FirstBytes(jpeg, n)); }),
                 Catch::StartsWith("the JPEG data is truncated or corrupt: "));
    }
  }
  SECTION("noise over the middle") {
    const auto corrupt = NoiseOverMiddle(jpeg);
    CHECK_FALSE(cv::imdecode(corrupt, cv::IMREAD_COLOR).empty());
    CHECK_THAT(ErrorOf([&] { DecodeJpegRgb(corrupt); }),
               Catch::StartsWith("the JPEG data is truncated or corrupt: Corrupt JPEG data: "));
  }
  SECTION("a marker in the middle of the scan") {
    auto corrupt = jpeg;
    corrupt[jpeg.size() / 2] = 0xFF;
    corrupt[jpeg.size() / 2 + 1] = 0xD9;
    CHECK(ErrorOf([&] { DecodeJpegRgb(corrupt); }) ==
          "the JPEG data is truncated or corrupt: Corrupt JPEG data: premature end of data "
          "segment");
  }
  SECTION("not JPEG data after the signature") {
    const std::vector<uint8_t> junk = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 'x', 'y', 'z'};
    CHECK_THAT(ErrorOf([&] { DecodeJpegRgb(junk); }), Catch::StartsWith("the JPEG "));
  }
}

TEST_CASE("PNG chunk check: CRC mismatches and truncation", "[decode][png][bad-data]") {
  const auto png = EncodeImage(NoisyBgr(128, 96, 2), ".png");
  REQUIRE_NOTHROW(CheckPngChunks(png));
  const auto with_text = WithTextChunk(png);
  REQUIRE_NOTHROW(CheckPngChunks(with_text));
  CHECK(SamePixels(OpenCvRgb(with_text), OpenCvRgb(png)));

  SECTION("a CRC byte flipped") {
    for (const std::string type : {"IHDR", "IDAT", "IEND"}) {
      CHECK_THAT(ErrorOf([&] { CheckPngChunks(FlipPngCrcByte(png, type)); }),
                 Catch::StartsWith("the PNG data is corrupt: CRC mismatch in the " + type +
                                   " chunk at byte "));
    }
    // An ancillary chunk: libpng only warns, OpenCV decodes it.
    const auto bad_text = FlipPngCrcByte(with_text, "tEXt");
    CHECK_FALSE(cv::imdecode(bad_text, cv::IMREAD_COLOR).empty());
    CHECK_THAT(ErrorOf([&] { CheckPngChunks(bad_text); }),
               Catch::StartsWith("the PNG data is corrupt: CRC mismatch in the tEXt chunk at "
                                 "byte 33 (stored "));
  }
  SECTION("a data byte flipped") {
    auto corrupt = png;
    corrupt[png.size() / 2] ^= 0x10;
    CHECK_THAT(ErrorOf([&] { CheckPngChunks(corrupt); }),
               Catch::Contains("CRC mismatch in the IDAT chunk"));
  }
  SECTION("truncated") {
    CHECK_THAT(ErrorOf([&] { CheckPngChunks(FirstBytes(png, 700)); }),
               Catch::StartsWith("the PNG data is truncated: the IDAT chunk at byte 33 declares"));
    CHECK(ErrorOf([&] { CheckPngChunks(FirstBytes(png, png.size() - 12)); }) ==
          "the PNG data is truncated: its " + std::to_string(png.size() - 12) +
              " bytes end before the IEND chunk");
    CHECK(ErrorOf([&] { CheckPngChunks(FirstBytes(png, png.size() - 5)); }) ==
          "the PNG data is truncated: its " + std::to_string(png.size() - 5) +
              " bytes end inside the chunk header at byte " + std::to_string(png.size() - 12) +
              ", before the IEND chunk");
    CHECK(ErrorOf([&] { CheckPngChunks(FirstBytes(png, 8)); }) ==
          "the PNG data is truncated: its 8 bytes end before the IEND chunk");
  }
  SECTION("bad structure") {
    auto renamed = png;
    renamed[15] = 'X';  // IHDR -> IHDX
    CHECK(ErrorOf([&] { CheckPngChunks(renamed); }) ==
          "the PNG data is corrupt: its first chunk is IHDX, not IHDR");
    auto huge = png;
    huge[8] = 0x80;  // IHDR length 2^31 + 13
    CHECK_THAT(ErrorOf([&] { CheckPngChunks(huge); }), Catch::Contains("over 2^31-1"));
    CHECK(ErrorOf([&] {
            CheckPngChunks(std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a'});
          }) == "the data does not start with the PNG signature");
  }
  SECTION("bytes after IEND are not part of the image") {
    auto trailing = png;
    trailing.insert(trailing.end(), {'j', 'u', 'n', 'k'});
    CHECK_NOTHROW(CheckPngChunks(trailing));
  }
}
