#pragma once
// PNG and JPEG files from 8-bit RGB images, over libpng and libjpeg directly (the project
// carries no OpenCV image codecs; see png_decode.cpp). Used for the synthetic data sets,
// `trainer visualize` and the validation pictures in TensorBoard.
#include <filesystem>
#include <opencv2/core.hpp>
#include <string>

namespace mrcnn::data {

// The PNG file bytes of `rgb` (CV_8UC3 in RGB order, or CV_8UC1 grey). Lossless: decoding
// gives the same pixels back. Throws std::runtime_error when encoding fails.
std::string EncodePngRgb(const cv::Mat& rgb);

// Baseline JPEG bytes of `rgb` (CV_8UC3, RGB) at `quality` 1..100 with libjpeg's defaults
// (4:2:0 chroma, no Huffman optimisation): the same settings, and therefore the same bytes,
// as OpenCV's cv::imencode(".jpg") at IMWRITE_JPEG_QUALITY `quality` (its default is 95).
std::string EncodeJpegRgb(const cv::Mat& rgb, int quality = 95);

// Writes `rgb` as PNG (.png) or JPEG (.jpg/.jpeg, quality 95), chosen by the extension
// (case-insensitive). Throws std::runtime_error naming the path for any other extension
// or when the file cannot be written.
void WriteImageFile(const std::filesystem::path& path, const cv::Mat& rgb);

}  // namespace mrcnn::data
