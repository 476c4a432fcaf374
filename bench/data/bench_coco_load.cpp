// Times CocoDataset::Load on a file (training view and evaluation view); prints JSON.
#include <chrono>
#include <cstdio>

#include "trainer/data/coco_dataset.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_coco_load INSTANCES.json [repeats]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 1;
  double best_train = 1e30, best_eval = 1e30;
  size_t images = 0, anns = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto ds = mrcnn::data::CocoDataset::Load(argv[1]);
    auto t1 = std::chrono::steady_clock::now();
    mrcnn::data::CocoLoadOptions raw;
    raw.validate_annotations = false;
    auto ev = mrcnn::data::CocoDataset::Load(argv[1], raw);
    auto t2 = std::chrono::steady_clock::now();
    best_train = std::min(best_train, std::chrono::duration<double>(t1 - t0).count());
    best_eval = std::min(best_eval, std::chrono::duration<double>(t2 - t1).count());
    images = ds.images().size();
    anns = ds.annotations().size();
  }
  std::printf("{\"images\": %zu, \"annotations\": %zu, \"train_view_s\": %.4f, \"eval_view_s\": %.4f}\n",
              images, anns, best_train, best_eval);
  return 0;
}
