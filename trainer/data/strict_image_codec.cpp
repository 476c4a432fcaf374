#include "trainer/data/strict_image_codec.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <string>
#include <vector>
// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

namespace mrcnn::data {
namespace {

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// ---- JPEG ----

// libjpeg reports errors and warnings through this; `pub` comes first so that
// cinfo->err (a jpeg_error_mgr*) points at the whole struct.
struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool warning;  // the jump came from a warning (damaged data), not a fatal error
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JumpOut(j_common_ptr cinfo, bool warning) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  err->warning = warning;
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// libjpeg's default error_exit calls exit(); we return to RunJpegDecode instead.
void OnJpegError(j_common_ptr cinfo) {
  JumpOut(cinfo, false);
}

// msg_level -1 is a warning: libjpeg met missing or corrupt data and is about to make up
// pixels (grey for a truncated file, whatever follows a skipped marker for a corrupt one).
// Those are not the pixels the sender meant, so a warning stops the decode. Levels >= 0
// are trace messages; they stay silent, as with libjpeg's default trace_level 0.
void OnJpegMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) {
    JumpOut(cinfo, true);
  }
}

// Everything a longjmp out of libjpeg can leave behind lives here, in the caller's frame:
// the jump then skips no destructor and RunJpegDecode reads no local it changed after
// setjmp (both undefined behaviour otherwise).
struct JpegDecode {
  jpeg_decompress_struct cinfo{};  // zeroed: jpeg_destroy_decompress is safe even unused
  JpegErrorManager err{};
  cv::Mat rgb;
  std::vector<uint8_t> cmyk_row;

  JpegDecode() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = OnJpegError;
    err.pub.emit_message = OnJpegMessage;
  }
  ~JpegDecode() { jpeg_destroy_decompress(&cinfo); }
  JpegDecode(const JpegDecode&) = delete;
  JpegDecode& operator=(const JpegDecode&) = delete;
};

// False when libjpeg jumped out; d->err says why. Mirrors OpenCV 4's JpegDecoder for a
// colour read: RGB out of libjpeg for 1- and 3-component images, CMYK for 4-component
// ones, converted below.
bool RunJpegDecode(JpegDecode* d, const uint8_t* data, unsigned long size) {
  if (setjmp(d->err.jump) != 0) {
    return false;
  }
  jpeg_create_decompress(&d->cinfo);
  jpeg_mem_src(&d->cinfo, data, size);
  jpeg_read_header(&d->cinfo, TRUE);
  const bool cmyk = d->cinfo.num_components == 4;
  d->cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&d->cinfo);
  const int height = static_cast<int>(d->cinfo.output_height);
  const int width = static_cast<int>(d->cinfo.output_width);
  d->rgb.create(height, width, CV_8UC3);
  if (cmyk) {
    d->cmyk_row.resize(static_cast<size_t>(width) * 4);
  }
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    uint8_t* out = d->rgb.ptr<uint8_t>(static_cast<int>(d->cinfo.output_scanline));
    JSAMPROW row = cmyk ? d->cmyk_row.data() : out;
    // A memory source never suspends: running out of data is a warning (fake EOI).
    if (jpeg_read_scanlines(&d->cinfo, &row, 1) != 1) {
      std::snprintf(d->err.message, sizeof d->err.message, "libjpeg returned no scanline");
      d->err.warning = true;
      return false;
    }
    if (cmyk) {
      // OpenCV's icvCvt_CMYK2BGR_8u_C4C3R (Adobe's inverted CMYK), in RGB order.
      for (int x = 0; x < width; ++x) {
        const int c = row[4 * x], m = row[4 * x + 1], y = row[4 * x + 2], k = row[4 * x + 3];
        out[3 * x] = static_cast<uint8_t>(k - (((255 - c) * k) >> 8));
        out[3 * x + 1] = static_cast<uint8_t>(k - (((255 - m) * k) >> 8));
        out[3 * x + 2] = static_cast<uint8_t>(k - (((255 - y) * k) >> 8));
      }
    }
  }
  // Reads on to EOI, so damage after the last scanline (extraneous bytes) is seen too.
  jpeg_finish_decompress(&d->cinfo);
  return true;
}

// ---- PNG ----

// A chunk type for messages: four letters in a valid file, escaped bytes in a damaged one.
std::string ChunkName(const uint8_t* type) {
  std::string name;
  for (int i = 0; i < 4; ++i) {
    const uint8_t c = type[i];
    name += (c >= 0x21 && c <= 0x7E) ? std::string(1, static_cast<char>(c))
                                     : fmt::format("\\x{:02x}", c);
  }
  return name;
}

}  // namespace

bool HasJpegSignature(std::span<const uint8_t> bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

bool HasPngSignature(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return bytes.size() >= 8 && std::equal(kSignature, kSignature + 8, bytes.begin());
}

cv::Mat DecodeJpegRgb(std::span<const uint8_t> bytes, cv::Mat into) {
  JpegDecode decode;
  decode.rgb = std::move(into);  // create() keeps its memory when the size and type match
  if (!RunJpegDecode(&decode, bytes.data(), static_cast<unsigned long>(bytes.size()))) {
    // A warning means damaged data; a fatal error can also be a valid JPEG that libjpeg
    // does not support (lossless, 12-bit, ...), hence two wordings.
    throw ImageDataError(std::string(decode.err.warning ? "the JPEG data is truncated or corrupt: "
                                                        : "the JPEG image cannot be decoded: ") +
                         decode.err.message);
  }
  return std::move(decode.rgb);
}

void CheckPngChunks(std::span<const uint8_t> bytes) {
  if (!HasPngSignature(bytes)) {
    throw ImageDataError("the data does not start with the PNG signature");
  }
  size_t pos = 8;
  bool first = true;
  while (true) {
    // length, type, CRC: 12 bytes around the data
    if (bytes.size() - pos < 12) {
      throw ImageDataError(
          pos == bytes.size()
              ? fmt::format("the PNG data is truncated: its {} bytes end before the IEND chunk",
                            bytes.size())
              : fmt::format("the PNG data is truncated: its {} bytes end inside the chunk "
                            "header at byte {}, before the IEND chunk",
                            bytes.size(), pos));
    }
    const uint32_t length = ReadBigEndian32(bytes.data() + pos);
    const std::string name = ChunkName(bytes.data() + pos + 4);
    if (length > 0x7FFFFFFFu) {  // the PNG limit on a chunk's length
      throw ImageDataError(fmt::format(
          "the PNG data is corrupt: the {} chunk at byte {} declares {} bytes (over 2^31-1)", name,
          pos, length));
    }
    if (bytes.size() - pos - 12 < length) {
      throw ImageDataError(
          fmt::format("the PNG data is truncated: the {} chunk at byte {} declares {} data "
                      "bytes but only {} remain",
                      name, pos, length, bytes.size() - pos - 12));
    }
    if (first && name != "IHDR") {
      throw ImageDataError(
          fmt::format("the PNG data is corrupt: its first chunk is {}, not IHDR", name));
    }
    first = false;
    // CRC-32 over type and data (the length is not covered).
    const uint32_t computed = static_cast<uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), bytes.data() + pos + 4, static_cast<uInt>(length) + 4));
    const uint32_t stored = ReadBigEndian32(bytes.data() + pos + 8 + length);
    if (computed != stored) {
      throw ImageDataError(
          fmt::format("the PNG data is corrupt: CRC mismatch in the {} chunk at byte {} "
                      "(stored {:08x}, computed {:08x})",
                      name, pos, stored, computed));
    }
    if (name == "IEND") {
      return;
    }
    pos += 12 + length;
  }
}

}  // namespace mrcnn::data
