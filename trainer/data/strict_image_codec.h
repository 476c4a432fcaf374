#pragma once
// JPEG and PNG decoding that refuses damaged data instead of repairing it. libjpeg fills a
// truncated JPEG with grey and skips over corrupt entropy data, reporting either only as a
// warning; libpng only warns about a CRC mismatch in an ancillary chunk. OpenCV's imdecode
// ignores those warnings, so a cut-off upload or a damaged training file decoded "fine".
// Here every libjpeg warning is an error, and a PNG's chunk structure and CRCs are checked
// before it is decoded. Used by the server (serving/codec/image_decoding) and the training data
// loader (image_decode.h); Torch-free so the server and its fuzz target link it alone.
#include <cstdint>
#include <opencv2/core.hpp>
#include <span>
#include <stdexcept>

namespace mrcnn::data {

// The bytes are a JPEG or PNG that is truncated, corrupt, or that libjpeg cannot decode.
// what() says which and why ("the JPEG data is truncated or corrupt: Premature end of JPEG
// file"), without naming a source: callers add the file or request.
class ImageDataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// FF D8 FF: SOI followed by a marker (what OpenCV's JPEG decoder looks for).
bool HasJpegSignature(std::span<const uint8_t> bytes);
// The 8-byte PNG signature.
bool HasPngSignature(std::span<const uint8_t> bytes);

// Decodes a JPEG to 8-bit RGB (CV_8UC3, continuous) with libjpeg, exactly as OpenCV's
// imdecode would (same library, same settings: accurate integer IDCT, fancy upsampling;
// grayscale replicated; CMYK/YCCK converted with OpenCV's formula; EXIF orientation not
// applied), except that any libjpeg warning (premature end of file, corrupt data, bad
// Huffman code, extraneous bytes, ...) throws ImageDataError instead of being papered over.
//
// `into`, for both decoders: when it already has the image's size and type CV_8UC3
// (continuous), the pixels are written into its memory and the result shares it (the
// server decodes straight into its request's buffer: no second copy of a large image);
// otherwise the result is newly allocated.
cv::Mat DecodeJpegRgb(std::span<const uint8_t> bytes, cv::Mat into = cv::Mat());

// Decodes a PNG to 8-bit RGB (CV_8UC3, continuous) with libpng after CheckPngChunks, with
// the transforms OpenCV's imdecode(IMREAD_COLOR) applies: 16-bit samples keep their high
// byte, alpha and tRNS transparency are dropped without compositing, palettes and greys
// become RGB. Throws ImageDataError for damaged data or a PNG libpng refuses.
cv::Mat DecodePngRgb(std::span<const uint8_t> bytes, cv::Mat into = cv::Mat());

// Walks a PNG's chunks without decoding: throws ImageDataError unless the signature is
// there, IHDR comes first, every chunk up to IEND is complete and its CRC-32 matches.
// Bytes after IEND are ignored (libpng ignores them too; they do not change the image).
void CheckPngChunks(std::span<const uint8_t> bytes);

}  // namespace mrcnn::data
