// Resize speed: ResizeBilinearLikePil (Pillow's bilinear, what Detectron2 resizes with) against
// cv::resize INTER_LINEAR on the same uint8 RGB image, each on one thread; and the way
// Detectron2-convention inference made the model's input before (uint8 -> float in [0, 1] ->
// torch's bilinear interpolate at the model, what torchvision's convention still does) against
// now (the uint8 resize, then the float conversion), on torch's threads. bench_resize.py runs
// it and times Pillow itself in the same run.
//
// usage: bench_resize HEIGHT WIDTH OUT_HEIGHT OUT_WIDTH [REPEATS] [THREADS]
// prints one line per measure: "<name> <median ms>".
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "trainer/data/pil_bilinear_resize.h"

namespace {

double MedianMs(int repeats, const std::function<void()>& run) {
  std::vector<double> times;
  run();  // warm-up
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s HEIGHT WIDTH OUT_HEIGHT OUT_WIDTH [REPEATS] [THREADS]\n",
                 argv[0]);
    return 2;
  }
  const int h = std::atoi(argv[1]), w = std::atoi(argv[2]);
  const int oh = std::atoi(argv[3]), ow = std::atoi(argv[4]);
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 20;
  at::set_num_threads(argc > 6 ? std::atoi(argv[6]) : 2);
  cv::Mat rgb(h, w, CV_8UC3);
  std::mt19937 rng(1);
  for (size_t i = 0; i < rgb.total() * 3; ++i)
    rgb.data[i] = static_cast<uint8_t>(rng() >> 24);
  cv::Mat out(oh, ow, CV_8UC3);
  const mrcnn::data::ConstPixels source{rgb.data, h, w, 3, w * 3};
  const mrcnn::data::MutablePixels target{out.data, oh, ow, 3, ow * 3};
  std::printf("pil_equal_1_thread %.3f\n",
              MedianMs(repeats, [&] { mrcnn::data::ResizeBilinearLikePil(source, target); }));
  cv::setNumThreads(1);
  std::printf("opencv_linear_1_thread %.3f\n",
              MedianMs(repeats, [&] { cv::resize(rgb, out, out.size(), 0, 0, cv::INTER_LINEAR); }));
  const at::Tensor hwc = torch::from_blob(rgb.data, {h, w, 3}, torch::kByte);
  std::printf(
      "before_float_interpolate %.3f\n", MedianMs(repeats, [&] {
        const at::Tensor image = hwc.permute({2, 0, 1}).to(torch::kFloat).div_(255.0);
        at::upsample_bilinear2d(image.unsqueeze(0), {oh, ow}, false, std::nullopt, std::nullopt);
      }));
  const mrcnn::data::RowRangeRunner threads =
      [](int64_t count, const std::function<void(int64_t, int64_t)>& body) {
        at::parallel_for(0, count, 16, body);
      };
  std::printf("now_uint8_pil_equal_then_float %.3f\n", MedianMs(repeats, [&] {
                at::Tensor resized = at::empty({oh, ow, 3}, torch::kByte);
                mrcnn::data::ResizeBilinearLikePil(
                    source, {resized.data_ptr<uint8_t>(), oh, ow, 3, ow * 3}, threads);
                resized.permute({2, 0, 1}).to(torch::kFloat).div_(255.0);
              }));
  return 0;
}
