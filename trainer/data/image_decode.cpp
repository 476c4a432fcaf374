#include "trainer/data/image_decode.h"

#include <stdexcept>

#include "trainer/data/strict_image_codec.h"
#include "trainer/data/whole_file.h"

namespace mrcnn::data {

cv::Mat DecodeImageRgb(const std::filesystem::path& path) {
  std::string bytes;
  try {
    bytes = ReadWholeFile(path, "the image");
  } catch (const std::exception&) {
    throw std::runtime_error(path.string() + ": image file is missing or unreadable");
  }
  return DecodeImageRgb(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      path.string());
}

cv::Mat DecodeImageRgb(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.empty())
    throw std::runtime_error(source + ": image file is empty");
  // A truncated or corrupt file is an error here, i.e. a skipped item in the data loader,
  // rather than an image with made-up pixels.
  try {
    if (HasJpegSignature(bytes)) {
      return DecodeJpegRgb(bytes);
    }
    if (HasPngSignature(bytes)) {
      return DecodePngRgb(bytes);
    }
  } catch (const ImageDataError& e) {
    throw std::runtime_error(source + ": " + e.what());
  }
  throw std::runtime_error(source +
                           ": not a JPEG or PNG file (unknown signature); convert the image to "
                           "JPEG or PNG, the formats the trainer and the server read");
}

}  // namespace mrcnn::data
