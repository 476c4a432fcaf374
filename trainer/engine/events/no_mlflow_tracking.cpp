// A build without tracking/ (OpenSSL missing): MLFLOW_TRACKING_URI cannot be honoured.
#include <cstdlib>

#include "trainer/engine/events/mlflow_tracking.h"

namespace mrcnn::engine {

std::unique_ptr<MlflowTracking> MlflowTracking::Start(const TrainJob&, const MlflowJobFacts&,
                                                      const ConsoleLog& log) {
  if (const char* uri = std::getenv("MLFLOW_TRACKING_URI"); uri != nullptr && *uri != '\0') {
    log.Line(
        "[mlflow] warning: MLFLOW_TRACKING_URI is set but this trainer was built without "
        "tracking/ (OpenSSL's libssl-dev was missing): nothing is tracked in MLflow");
  }
  return nullptr;
}

}  // namespace mrcnn::engine
