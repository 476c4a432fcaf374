#include "trainer/data/image_encode.h"

#include <png.h>

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>
// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "trainer/data/png_error_handlers.h"

namespace mrcnn::data {
namespace {

void CheckRgb8(const cv::Mat& image, bool allow_grey, const char* what) {
  const bool ok = image.type() == CV_8UC3 || (allow_grey && image.type() == CV_8UC1);
  if (!ok || image.empty()) {
    throw std::runtime_error(std::string(what) + " encoding needs a non-empty 8-bit " +
                             (allow_grey ? "RGB or grey" : "RGB") + " image, got type " +
                             std::to_string(image.type()) + " of " + std::to_string(image.cols) +
                             "x" + std::to_string(image.rows));
  }
}

// ---- PNG ----

void AppendToString(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))
      ->append(reinterpret_cast<const char*>(data), length);
}
void NoFlush(png_structp) {}

// Everything a longjmp out of libpng can leave behind lives here, in the caller's frame.
struct PngEncode {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string error;
  std::string out;
  std::vector<png_bytep> rows;
  ~PngEncode() {
    if (png != nullptr) {
      png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
    }
  }
};

bool RunPngEncode(PngEncode* e, const cv::Mat& image) {
  e->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &e->error, OnPngError, OnPngWarning);
  e->info = e->png != nullptr ? png_create_info_struct(e->png) : nullptr;
  if (e->info == nullptr) {
    e->error = "libpng could not allocate its encoder";
    return false;
  }
  if (setjmp(png_jmpbuf(e->png)) != 0) {
    return false;
  }
  png_set_write_fn(e->png, &e->out, AppendToString, NoFlush);
  // Level 3 with filters: within a few percent of level 9's size at a fraction of its time,
  // for pictures that are written every evaluation.
  png_set_compression_level(e->png, 3);
  png_set_IHDR(e->png, e->info, static_cast<png_uint_32>(image.cols),
               static_cast<png_uint_32>(image.rows), 8,
               image.channels() == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(e->png, e->info);
  e->rows.resize(static_cast<size_t>(image.rows));
  for (int y = 0; y < image.rows; ++y) {
    e->rows[static_cast<size_t>(y)] = const_cast<png_bytep>(image.ptr<uint8_t>(y));
  }
  png_write_image(e->png, e->rows.data());
  png_write_end(e->png, nullptr);
  return true;
}

// ---- JPEG ----

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first, so cinfo->err points at the whole struct
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnJpegError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

struct JpegEncode {
  jpeg_compress_struct cinfo{};
  JpegErrorManager err{};
  unsigned char* buffer = nullptr;  // jpeg_mem_dest's, freed with free()
  unsigned long size = 0;
  JpegEncode() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = OnJpegError;
  }
  ~JpegEncode() {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
  JpegEncode(const JpegEncode&) = delete;
  JpegEncode& operator=(const JpegEncode&) = delete;
};

bool RunJpegEncode(JpegEncode* e, const cv::Mat& rgb, int quality) {
  if (setjmp(e->err.jump) != 0) {
    return false;
  }
  jpeg_create_compress(&e->cinfo);
  jpeg_mem_dest(&e->cinfo, &e->buffer, &e->size);
  e->cinfo.image_width = static_cast<JDIMENSION>(rgb.cols);
  e->cinfo.image_height = static_cast<JDIMENSION>(rgb.rows);
  e->cinfo.input_components = 3;
  e->cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&e->cinfo);
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb.ptr<uint8_t>(static_cast<int>(e->cinfo.next_scanline)));
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

std::string LowerExtension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

}  // namespace

std::string EncodePngRgb(const cv::Mat& rgb) {
  CheckRgb8(rgb, true, "PNG");
  PngEncode encode;
  if (!RunPngEncode(&encode, rgb)) {
    throw std::runtime_error("PNG encoding of a " + std::to_string(rgb.cols) + "x" +
                             std::to_string(rgb.rows) + " image failed: " + encode.error);
  }
  return std::move(encode.out);
}

std::string EncodeJpegRgb(const cv::Mat& rgb, int quality) {
  CheckRgb8(rgb, false, "JPEG");
  if (quality < 1 || quality > 100) {
    throw std::runtime_error("JPEG quality must be in 1..100, got " + std::to_string(quality));
  }
  JpegEncode encode;
  if (!RunJpegEncode(&encode, rgb, quality)) {
    throw std::runtime_error("JPEG encoding of a " + std::to_string(rgb.cols) + "x" +
                             std::to_string(rgb.rows) + " image failed: " + encode.err.message);
  }
  return std::string(reinterpret_cast<const char*>(encode.buffer), encode.size);
}

void WriteImageFile(const std::filesystem::path& path, const cv::Mat& rgb) {
  const std::string ext = LowerExtension(path);
  std::string bytes;
  if (ext == ".png") {
    bytes = EncodePngRgb(rgb);
  } else if (ext == ".jpg" || ext == ".jpeg") {
    bytes = EncodeJpegRgb(rgb);
  } else {
    throw std::runtime_error(path.string() +
                             ": cannot write this image format; use a .png, .jpg or .jpeg name");
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) {
    throw std::runtime_error(path.string() + ": cannot write the image file");
  }
}

}  // namespace mrcnn::data
