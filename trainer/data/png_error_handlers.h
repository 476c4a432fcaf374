#pragma once
// libpng's error and warning callbacks, shared by the PNG decoder and encoder. Create the
// png struct with a std::string* as its error pointer: a fatal error stores its message
// there and longjmps to png_jmpbuf (the caller then throws from C++ frames). Warnings (an
// odd iCCP profile, a benign extra byte) do not change the pixels; integrity is
// CheckPngChunks' job, so they are dropped as OpenCV did.
#include <png.h>

#include <string>

namespace mrcnn::data {

inline void OnPngError(png_structp png, png_const_charp message) {
  static_cast<std::string*>(png_get_error_ptr(png))->assign(message ? message : "libpng error");
  png_longjmp(png, 1);
}

inline void OnPngWarning(png_structp, png_const_charp) {}

}  // namespace mrcnn::data
