#pragma once
// Where a predictor comes from: the server's flags that choose and load it
// (server_config.h PredictorSourceOf), so models/ knows nothing of the flags. Torch-free.
#include <filesystem>
#include <string>

namespace mrcnn::serving {

struct PredictorSource {
  std::string predictor = "auto";  // auto | model | statistics (a test facility)
  std::filesystem::path model_dir;
  std::string model_dir_source;    // where model_dir came from, for messages
  std::string device = "cpu";      // cpu, cuda, cuda:N
  std::string precision = "auto";  // auto, fp32, bf16, fp16 (CUDA)
  int num_threads = 0;             // torch intra-op threads per worker; 0: torch's default
};

// The model dir's marker file that makes "auto" choose the statistics predictor.
inline constexpr char kStatisticsPredictorMarker[] = "statistics_predictor.json";

// "statistics" when source.predictor says so, or when it is "auto" and the model dir holds
// statistics_predictor.json; "model" otherwise.
std::string ResolvePredictorKind(const PredictorSource& source);

}  // namespace mrcnn::serving
