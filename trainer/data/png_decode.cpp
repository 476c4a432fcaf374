// PNG decoding with libpng (declared in strict_image_codec.h). The transforms are the ones
// OpenCV 4's PngDecoder applies for a colour read, so pixels match what cv::imdecode gave
// before OpenCV's image codecs were dropped (their Debian build links GDAL, Mesa and LLVM:
// over a hundred libraries that neither the images nor the GPU check should carry).
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/data/png_error_handlers.h"
#include "trainer/data/strict_image_codec.h"

namespace mrcnn::data {
namespace {

struct MemoryReader {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

void ReadFromMemory(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (reader->size - reader->pos < length) {
    png_error(png, "the PNG data ends early");
  }
  std::memcpy(out, reader->data + reader->pos, length);
  reader->pos += length;
}

// Everything that a longjmp can leave behind lives in the caller's frame (see the JPEG
// decoder for why).
struct PngDecode {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string error;
  MemoryReader reader{};
  cv::Mat rgb;
  std::vector<png_bytep> rows;

  ~PngDecode() {
    if (png != nullptr) {
      png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    }
  }
};

bool RunPngDecode(PngDecode* d) {
  d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d->error, OnPngError, OnPngWarning);
  if (d->png == nullptr) {
    d->error = "libpng could not allocate its decoder";
    return false;
  }
  d->info = png_create_info_struct(d->png);
  if (d->info == nullptr) {
    d->error = "libpng could not allocate its decoder";
    return false;
  }
  if (setjmp(png_jmpbuf(d->png)) != 0) {
    return false;
  }
  png_set_read_fn(d->png, &d->reader, ReadFromMemory);
  png_read_info(d->png, d->info);
  const png_uint_32 width = png_get_image_width(d->png, d->info);
  const png_uint_32 height = png_get_image_height(d->png, d->info);
  const int bit_depth = png_get_bit_depth(d->png, d->info);
  const int colour_type = png_get_color_type(d->png, d->info);
  if (width > 0x7FFFFFFFu / 3 || height > 0x7FFFFFFFu) {
    png_error(d->png, "the image is too large");
  }
  // As OpenCV for 8-bit colour: 16-bit samples keep their high byte, alpha and tRNS are
  // dropped (no compositing), palettes and low-depth greys expand, grey is replicated.
  if (bit_depth == 16) {
    png_set_strip_16(d->png);
  }
  png_set_strip_alpha(d->png);
  if (colour_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(d->png);
  }
  if ((colour_type & PNG_COLOR_MASK_COLOR) == 0) {
    if (bit_depth < 8) {
      png_set_expand_gray_1_2_4_to_8(d->png);
    }
    png_set_gray_to_rgb(d->png);
  }
  png_set_interlace_handling(d->png);
  png_read_update_info(d->png, d->info);
  if (png_get_channels(d->png, d->info) != 3 || png_get_bit_depth(d->png, d->info) != 8) {
    png_error(d->png, "libpng did not produce 8-bit RGB for this image");
  }
  d->rgb.create(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  d->rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) {
    d->rows[y] = d->rgb.ptr<uint8_t>(static_cast<int>(y));
  }
  png_read_image(d->png, d->rows.data());
  png_read_end(d->png, nullptr);
  return true;
}

}  // namespace

cv::Mat DecodePngRgb(std::span<const uint8_t> bytes, cv::Mat into) {
  CheckPngChunks(bytes);
  PngDecode decode;
  decode.rgb = std::move(into);  // create() keeps its memory when the size and type match
  decode.reader = {bytes.data(), bytes.size(), 0};
  if (!RunPngDecode(&decode)) {
    throw ImageDataError("the PNG image cannot be decoded: " + decode.error);
  }
  return std::move(decode.rgb);
}

}  // namespace mrcnn::data
