#include "serving/routes/v2_infer_route.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <memory>

#include "serving/codec/v2_detector_request.h"
#include "serving/codec/v2_response_encoding.h"
#include "serving/http/log_line.h"
#include "serving/routes/invocation_route.h"

namespace mrcnn::serving {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;
using Admission = std::shared_ptr<ServerLifecycle::Admission>;

constexpr char kHeaderLength[] = "Inference-Header-Content-Length";

// One infer request between its headers and its answer.
struct V2Call {
  V2Services services;
  V2Model model;
  std::optional<size_t> header_length;
  Clock::time_point deadline;
};

RouteAnswer EncodedAnswer(const V2EncodedAnswer& encoded) {
  if (!encoded.header_length) {
    return RouteAnswer{200, encoded.body, "application/json", {}};
  }
  return RouteAnswer{200,
                     encoded.body,
                     "application/octet-stream",
                     {{kHeaderLength, std::to_string(*encoded.header_length)}}};
}

RouteAnswer OutcomeAnswer(const V2Call& call, const V2ResponseSpec& spec,
                          const InferenceOutcome& outcome) {
  using Status = InferenceOutcome::Status;
  switch (outcome.status) {
    case Status::kOk:
      return EncodedAnswer(EncodeV2InferResponse(outcome.results, spec));
    case Status::kFailed:
      LogLine("inference failed: {}", outcome.error);
      return V2ErrorAnswer(
          500, fmt::format("the model failed on this request's batch: {}", outcome.error));
    case Status::kDeadlineExceeded:
      return AsV2ErrorAnswer(DeadlineExceededAnswer(*call.services.config));
    case Status::kStopped:
      break;
  }
  return V2ErrorAnswer(503, "the server is shutting down");
}

// The request's images, decoded as /invocations decodes them.
std::vector<RgbImage> DecodeImages(V2DetectorRequest& request, const ServerConfig& config) {
  std::vector<RgbImage> images = std::move(request.pixels);
  for (const auto& bytes : request.encoded) {
    images.push_back(DecodeImage(bytes, config.image_limits));
  }
  return images;
}

V2DetectorLimits LimitsOf(const ServerConfig& config) {
  return {config.default_options, config.max_detections_cap, config.image_limits,
          config.max_images_per_request};
}

// CPU pool: the whole request as one executor job.
void RunInfer(const V2Call& call, std::vector<uint8_t> body, Admission admission, Reply reply) {
  const ServerConfig& config = *call.services.config;
  try {
    const auto outputs = call.model.executor->Outputs();
    V2ResponseSpec spec{call.model.name,
                        kV2ModelVersion,
                        {},
                        {},
                        V2MaskFormat::kRle,
                        outputs ? outputs->keypoints : 0};
    InferenceJob job;
    {
      V2DetectorRequest request =
          InterpretV2DetectorRequest(ParseV2InferRequest(body, call.header_length),
                                     outputs.value_or(PredictorOutputs{}), LimitsOf(config));
      job.images = DecodeImages(request, config);
      job.options = request.options;
      spec.id = std::move(request.id);
      spec.outputs = std::move(request.outputs);
      spec.mask_format = request.mask_format;
    }
    body = {};  // the images are decoded; the body's memory goes before the model runs
    job.deadline = call.deadline;
    job.done = [call, spec, admission, reply](InferenceOutcome&& outcome) {
      net::post(*call.services.cpu_pool,
                [call, spec, admission, reply, outcome = std::move(outcome)] {
                  try {
                    reply(OutcomeAnswer(call, spec, outcome));
                  } catch (const HttpError& e) {
                    reply(V2ErrorAnswer(e));
                  } catch (const std::exception& e) {
                    LogLine("error encoding a response: {}", e.what());
                    reply(V2ErrorAnswer(500, e.what()));
                  }
                });
    };
    const auto submitted = call.model.executor->TrySubmit(std::move(job));
    if (submitted != InferenceExecutor::SubmitResult::kAccepted) {
      reply(AsV2ErrorAnswer(RefusedJobAnswer(submitted, config)));
    }
  } catch (const HttpError& e) {
    reply(V2ErrorAnswer(e));
  } catch (const std::exception& e) {
    LogLine("error decoding a request: {}", e.what());
    reply(V2ErrorAnswer(500, e.what()));
  }
}

}  // namespace

std::optional<size_t> V2HeaderLengthOf(const boost::beast::http::request_header<>& fields) {
  const auto length = fields[kHeaderLength];  // Beast compares field names in any case
  return ParseV2HeaderLength(std::string_view(length.data(), length.size()));
}

RouteHandler V2InferRoute(V2Services services) {
  return V2Handler([services](const RequestHead& head) {
    const ServerConfig& config = *services.config;
    V2Call call{services,
                FindV2Model({services.config, services.executor, services.hosted}, head),
                {},
                head.received_at + config.request_deadline};
    if (!call.model.executor->Ready() || services.lifecycle->Draining()) {
      throw HttpError(503, "not_ready",
                      fmt::format("model \"{}\" is not ready (loading, warming up or the server "
                                  "is shutting down); poll GET /v2/models/{}/ready",
                                  call.model.name, call.model.name));
    }
    call.header_length = V2HeaderLengthOf(head.fields);
    Exchange exchange;
    exchange.deadline = call.deadline;
    exchange.deadline_answer = AsV2ErrorAnswer(DeadlineExceededAnswer(config));
    exchange.run = [call = std::move(call)](std::vector<uint8_t> body, Reply reply) {
      Admission admission = call.services.lifecycle->TryAdmit();
      if (!admission) {
        reply(AsV2ErrorAnswer(NotAdmittedAnswer(*call.services.lifecycle)));
        return;
      }
      net::post(*call.services.cpu_pool,
                [call, admission, body = std::move(body), reply = std::move(reply)]() mutable {
                  RunInfer(call, std::move(body), std::move(admission), std::move(reply));
                });
    };
    return exchange;
  });
}

}  // namespace mrcnn::serving
