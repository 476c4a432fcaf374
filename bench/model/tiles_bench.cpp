// Tiled inference speed (issue 26): per tile, the time of a tiled image against a lone
// request of the tile's size, through InferenceModel::Predict in one process (no process
// start or file I/O in the figures).
//
//   tiles_bench MODEL_DIR IMAGE.png TILE OVERLAP [TILE_BATCH] [LONE_REPEATS] [ROUNDS]
//
// Each round times LONE_REPEATS lone requests of TILE x TILE crops of the image, then the
// tiled image, then the lone requests again, and compares the time per tile with the mean
// of the two lone medians (on a shared machine the load drifts; the requests on both sides
// of the tiled run see the load it saw). Prints one JSON line per round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/data/image_decode.h"
#include "trainer/model/inference/inference.h"
#include "trainer/model/tiles/tile_grid.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: tiles_bench MODEL_DIR IMAGE TILE OVERLAP [TILE_BATCH] [LONE_REPEATS] [ROUNDS]\n");
    return 2;
  }
  using mrcnn::model::InferenceModel;
  const int64_t tile = std::stoll(argv[3]);
  const float overlap = std::stof(argv[4]);
  const int batch = argc > 5 ? std::stoi(argv[5]) : 4;
  const int repeats = argc > 6 ? std::stoi(argv[6]) : 20;
  const int rounds = argc > 7 ? std::stoi(argv[7]) : 1;
  auto model = InferenceModel::Load(argv[1], {});
  cv::Mat rgb = mrcnn::data::DecodeImageRgb(argv[2]);
  if (!rgb.isContinuous())
    rgb = rgb.clone();
  const InferenceModel::ImageView whole{rgb.data, rgb.rows, rgb.cols};

  mrcnn::model::PredictOptions lone_options;
  lone_options.max_detections = 1000;
  mrcnn::model::PredictOptions tiled_options = lone_options;
  tiled_options.tiles.size = tile;
  tiled_options.tiles.overlap = overlap;
  tiled_options.tiles.batch = batch;

  // Lone requests: TILE x TILE crops from across the image, one Predict each.
  const int64_t side = std::min<int64_t>({tile, rgb.rows, rgb.cols});
  model->Predict({InferenceModel::ImageView{rgb.data, side, side}}, lone_options);  // warm-up
  auto lone_median = [&] {
    std::vector<double> lone;
    for (int r = 0; r < repeats; ++r) {
      const int64_t x = (r * 97) % std::max<int64_t>(1, rgb.cols - side);
      const int64_t y = (r * 53) % std::max<int64_t>(1, rgb.rows - side);
      cv::Mat crop = rgb(cv::Rect(static_cast<int>(x), static_cast<int>(y), static_cast<int>(side),
                                  static_cast<int>(side)))
                         .clone();
      const auto start = std::chrono::steady_clock::now();
      model->Predict({InferenceModel::ImageView{crop.data, side, side}}, lone_options);
      lone.push_back(Seconds(start));
    }
    std::sort(lone.begin(), lone.end());
    return lone[lone.size() / 2];
  };
  const size_t tiles = mrcnn::model::TileGrid(rgb.rows, rgb.cols, tile, overlap).size();
  for (int round = 0; round < rounds; ++round) {
    const double before = lone_median();
    const auto start = std::chrono::steady_clock::now();
    const auto out = model->Predict({whole}, tiled_options);
    const double tiled = Seconds(start);
    const double after = lone_median();
    const double lone = (before + after) / 2;
    std::printf(
        "{\"image\": [%d, %d], \"tile\": %lld, \"overlap\": %.2f, \"tile_batch\": %d, \"round\": %d, "
        "\"tiles\": %zu, \"detections\": %zu, \"tiled_s\": %.3f, \"per_tile_s\": %.4f, "
        "\"lone_request_median_s\": [%.4f, %.4f], \"ratio_per_tile_vs_lone\": %.3f}\n",
        rgb.cols, rgb.rows, static_cast<long long>(tile), overlap, batch, round, tiles, out[0].detections.size(),
        tiled, tiled / static_cast<double>(tiles), before, after, tiled / static_cast<double>(tiles) / lone);
    std::fflush(stdout);
  }
  return 0;
}
