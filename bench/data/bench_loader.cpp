// Loader throughput (decode + resize/flip + masks + collation) in images/s, for 1..N
// workers, on a make-shapes dataset of COCO-like image size. Prints JSON lines.
#include <chrono>
#include <cstdio>
#include <thread>

#include "trainer/data/data_loader.h"
#include "trainer/data/synthetic_shapes.h"

int main(int argc, char** argv) {
  namespace d = mrcnn::data;
  const std::string dir = argc > 1 ? argv[1] : "bench/out/loader_shapes";
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 200;
  d::ShapesOptions so;
  so.output = dir;
  so.train_images = n;
  so.val_images = 0;
  so.image_size = 640;
  so.max_objects = 6;
  so.format = "jpg";
  d::WriteShapesDataset(so);
  auto ds = std::make_shared<const d::CocoDataset>(
      d::CocoDataset::Load(so.output / "annotations" / "instances_train.json"));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (int workers = 1; workers <= cores; ++workers) {
    d::LoaderOptions o;
    o.image_root = so.output / "train";
    o.batch_size = 2;
    o.num_workers = workers;
    o.transform.min_sizes = {800};
    o.transform.max_size = 1333;
    o.transform.flip_probability = 0.5;
    d::DataLoader loader(ds, o);
    loader.Next();  // warm-up
    const int batches = static_cast<int>(n / 2);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batches; ++i) loader.Next();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"workers\": %d, \"images_per_s\": %.1f, \"images_per_s_per_worker\": %.1f, "
                "\"image\": \"640x640 jpg -> 800x800, masks, flip\"}\n",
                workers, 2.0 * batches / s, 2.0 * batches / s / workers);
  }
  return 0;
}
