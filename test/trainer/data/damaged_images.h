#pragma once
// Intact and damaged JPEG/PNG bytes for the strict-decoding tests (trainer data and
// serving): a file cut short, a JPEG with noise over its middle, a PNG chunk whose CRC no
// longer matches. Link ZLIB::ZLIB (the tEXt chunk's CRC).
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::testing {

// Seeded noise over a gradient: compresses poorly, so the entropy-coded scan is most of a
// JPEG and the middle of the file lies inside it.
inline cv::Mat NoisyBgr(int width, int height, uint64_t seed) {
  cv::Mat bgr(height, width, CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(bgr, cv::RNG::UNIFORM, 0, 256);
  for (int y = 0; y < height; ++y) {
    bgr.row(y) = bgr.row(y) * 0.5 + cv::Scalar(y * 128 / height, 64, 128 - y * 128 / height);
  }
  return bgr;
}

inline std::vector<uint8_t> EncodeImage(const cv::Mat& image, const std::string& extension,
                                        std::vector<int> params = {}) {
  std::vector<uint8_t> bytes;
  if (!cv::imencode(extension, image, bytes, params)) {
    throw std::runtime_error("cv::imencode failed for " + extension);
  }
  return bytes;
}

// The reference decode: OpenCV's imdecode as a colour read (what the server and the data
// loader gave before our own codec), as RGB. Throws when OpenCV cannot decode the bytes.
inline cv::Mat OpenCvRgb(const std::vector<uint8_t>& bytes) {
  const cv::Mat bgr = cv::imdecode(bytes, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  if (bgr.empty()) {
    throw std::runtime_error("OpenCvRgb: cv::imdecode could not decode the reference image");
  }
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

inline bool SamePixels(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

inline std::vector<uint8_t> FirstBytes(const std::vector<uint8_t>& bytes, size_t n) {
  if (n >= bytes.size()) {
    throw std::runtime_error("FirstBytes: the image has only " + std::to_string(bytes.size()) +
                             " bytes; make it larger");
  }
  return {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)};
}

// 64 bytes of seeded xorshift noise over the middle of the file (the entropy-coded scan of
// a NoisyBgr JPEG). JPEG has no checksum, so not every such change is detectable; this
// one makes libjpeg warn ("Corrupt JPEG data: ...") for the test images used.
inline std::vector<uint8_t> NoiseOverMiddle(std::vector<uint8_t> bytes, uint32_t seed = 12345) {
  const size_t middle = bytes.size() / 2;
  for (size_t i = middle; i < middle + 64 && i < bytes.size(); ++i) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    bytes[i] = static_cast<uint8_t>(seed);
  }
  return bytes;
}

inline uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Offset of the first chunk of `type` (its length field). Throws when there is none.
inline size_t PngChunkOffset(const std::vector<uint8_t>& png, const std::string& type) {
  size_t pos = 8;
  while (pos + 12 <= png.size()) {
    if (std::string(png.begin() + static_cast<std::ptrdiff_t>(pos) + 4,
                    png.begin() + static_cast<std::ptrdiff_t>(pos) + 8) == type) {
      return pos;
    }
    pos += 12 + BigEndian32(png.data() + pos);
  }
  throw std::runtime_error("PngChunkOffset: no " + type + " chunk");
}

// Flips one bit in the last CRC byte of the first `type` chunk: the data is intact, the
// checksum no longer matches it.
inline std::vector<uint8_t> FlipPngCrcByte(std::vector<uint8_t> png, const std::string& type) {
  const size_t pos = PngChunkOffset(png, type);
  png[pos + 8 + BigEndian32(png.data() + pos) + 3] ^= 0x01;
  return png;
}

// Inserts a valid tEXt chunk after IHDR: an ancillary chunk, whose CRC mismatch libpng
// (and so OpenCV) only warns about.
inline std::vector<uint8_t> WithTextChunk(const std::vector<uint8_t>& png) {
  const std::string body = std::string("tEXt") + "Comment" + '\0' + "strict decoding test";
  const uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()),
                                  static_cast<uInt>(body.size())));
  // Written by index into a sized vector (GCC 12 misreads push_back/insert chains here as
  // overflows, -Wstringop-overflow).
  const size_t at = PngChunkOffset(png, "IHDR") + 12 + 13;  // right after IHDR
  const size_t chunk_size = 4 + body.size() + 4;
  std::vector<uint8_t> out(png.size() + chunk_size);
  auto put_big_endian = [&out](size_t pos, uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      out[pos + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (24 - 8 * i));
    }
  };
  std::copy(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(at), out.begin());
  put_big_endian(at, static_cast<uint32_t>(body.size() - 4));  // the type is not counted
  std::copy(body.begin(), body.end(), out.begin() + static_cast<std::ptrdiff_t>(at + 4));
  put_big_endian(at + 4 + body.size(), crc);
  std::copy(png.begin() + static_cast<std::ptrdiff_t>(at), png.end(),
            out.begin() + static_cast<std::ptrdiff_t>(at + chunk_size));
  return out;
}

}  // namespace mrcnn::testing
