#pragma once
// The multi-model endpoint's routes (SAGEMAKER_MULTI_MODEL=true), SageMaker's contract for
// CPU multi-model containers, over HostedModels (models/hosted_models.h):
//   POST   /models                 {"model_name", "url"} -> 200 once loaded and warmed up;
//                                  409 model_already_loaded; 404 model_dir_not_found;
//                                  400 bad_model (loading failed) or bad_json_body;
//                                  507 insufficient_memory (even after evicting the least
//                                  recently used models, or larger than the whole budget)
//   GET    /models                 {"models": [{"modelName", "modelUrl"}], "nextPageToken"},
//                                  sorted by name; ?limit=N (1..1000, default 100) per page,
//                                  ?next_page_token=T continues where a page stopped
//   GET    /models/{name}          {"modelName", "modelUrl"}; 404 model_not_found
//   DELETE /models/{name}          200 once unloaded (after its in-flight requests); 404
//   POST   /models/{name}/invoke   exactly /invocations (invocation_route.h) over that model;
//                                  404 model_not_found. X-Amzn-SageMaker-Target-Model is only
//                                  logged (with --access-log): the path names the model.
// {name} is percent-decoded. Loading and unloading block, so they run on a pool of their own
// and never hold up decoding or /ping.
#include <boost/asio/thread_pool.hpp>

#include "serving/http/route_table.h"
#include "serving/http/server_lifecycle.h"
#include "serving/models/hosted_models.h"
#include "serving/server_config.h"

namespace mrcnn::serving {

class MultiModelRoutes {
 public:
  // Adds the routes to `table`; everything must outlive this object, which must outlive
  // the server's requests (it owns the pool that loads and unloads).
  MultiModelRoutes(RouteTable& table, const ServerConfig& config, HostedModels& models,
                   ServerLifecycle& lifecycle, boost::asio::thread_pool& cpu_pool);
  ~MultiModelRoutes();  // waits for loads and unloads under way
  MultiModelRoutes(const MultiModelRoutes&) = delete;
  MultiModelRoutes& operator=(const MultiModelRoutes&) = delete;

 private:
  boost::asio::thread_pool admin_pool_{2};
};

// "%2F" -> "/"; throws HttpError 400 bad_request on a malformed escape.
std::string PercentDecode(std::string_view text);

}  // namespace mrcnn::serving
