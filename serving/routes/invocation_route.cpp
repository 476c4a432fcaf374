#include "serving/routes/invocation_route.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <memory>

#include "serving/codec/request_decoding.h"
#include "serving/codec/response_encoding.h"
#include "serving/http/log_line.h"
#include "serving/routes/multi_record_run.h"

namespace mrcnn::serving {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;
using Admission = std::shared_ptr<ServerLifecycle::Admission>;

constexpr char kCustomAttributes[] = "X-Amzn-SageMaker-Custom-Attributes";

std::string_view Field(const RequestHead& head, std::string_view name) {
  const auto value = head.fields[name];
  return {value.data(), value.size()};
}

RouteAnswer JsonAnswer(unsigned status, std::string body, int batch_images) {
  RouteAnswer answer{status, std::move(body), "application/json", {}};
  if (batch_images > 0) {
    answer.headers.emplace_back("X-Mrcnn-Batch-Images", std::to_string(batch_images));
  }
  return answer;
}

// The answer to a request that ran: its detections, or why not.
RouteAnswer OutcomeAnswer(const InferenceOutcome& outcome, bool list_form, bool masks,
                          const ServerConfig& config) {
  using Status = InferenceOutcome::Status;
  switch (outcome.status) {
    case Status::kOk:
      return JsonAnswer(200, EncodeDetectionsJson(outcome.results, list_form, masks),
                        outcome.batch_images);
    case Status::kFailed:
      LogLine("inference failed: {}", outcome.error);
      return JsonAnswer(500,
                        EncodeErrorJson("inference_failed",
                                        fmt::format("the model failed on this request's batch: {}",
                                                    outcome.error)),
                        outcome.batch_images);
    case Status::kDeadlineExceeded:
      return DeadlineExceededAnswer(config);
    case Status::kStopped:
      break;
  }
  return ErrorAnswer(503, "shutting_down", "the server is shutting down");
}

// CPU pool: image/* and application/json bodies, all images in one job.
void RunSingleRequest(const InvocationServices& services, std::vector<uint8_t> body, BodyKind kind,
                      PredictOptions options, Clock::time_point deadline, Admission admission,
                      Reply reply) {
  const ServerConfig& config = *services.config;
  try {
    bool list_form = false;
    InferenceJob job;
    {
      EncodedImages encoded = SplitInvocationBodyInPlace(kind, body, config.max_images_per_request);
      list_form = encoded.list_form;
      for (const auto& bytes : encoded.images) {
        job.images.push_back(DecodeImage(bytes, config.image_limits));
      }
    }
    body = {};
    job.options = options;
    job.deadline = deadline;
    job.done = [services, admission, list_form, masks = options.masks,
                reply](InferenceOutcome&& outcome) {
      net::post(*services.cpu_pool,
                [services, admission, list_form, masks, reply, outcome = std::move(outcome)] {
                  try {
                    reply(OutcomeAnswer(outcome, list_form, masks, *services.config));
                  } catch (const std::exception& e) {
                    LogLine("error encoding a response: {}", e.what());
                    reply(ErrorAnswer(500, "internal_error", e.what()));
                  }
                });
    };
    const auto submitted = services.executor->TrySubmit(std::move(job));
    if (submitted != InferenceExecutor::SubmitResult::kAccepted) {
      reply(RefusedJobAnswer(submitted, config));
    }
  } catch (const HttpError& e) {
    reply(ErrorAnswer(e));
  } catch (const std::exception& e) {
    LogLine("error decoding a request: {}", e.what());
    reply(ErrorAnswer(500, "internal_error", e.what()));
  }
}

}  // namespace

RouteAnswer DeadlineExceededAnswer(const ServerConfig& config) {
  return ErrorAnswer(503, "deadline_exceeded",
                     fmt::format("no result within {} ms (SAGEMAKER_MODEL_SERVER_TIMEOUT or "
                                 "--request-deadline-s); the server is overloaded",
                                 config.request_deadline.count()));
}

RouteAnswer NotAdmittedAnswer(const ServerLifecycle& lifecycle) {
  return ErrorAnswer(503, "queue_full",
                     fmt::format("{} requests are already being processed (--max-inflight); "
                                 "retry later",
                                 lifecycle.max_inflight()));
}

RouteAnswer RefusedJobAnswer(InferenceExecutor::SubmitResult result, const ServerConfig& config) {
  switch (result) {
    case InferenceExecutor::SubmitResult::kQueueFull:
      return ErrorAnswer(503, "queue_full",
                         fmt::format("the inference queue is full ({} requests waiting); retry "
                                     "later",
                                     config.batching.queue_capacity));
    case InferenceExecutor::SubmitResult::kNotReady:
      return ErrorAnswer(503, "not_ready", "the model is still loading or warming up");
    case InferenceExecutor::SubmitResult::kAccepted:
    case InferenceExecutor::SubmitResult::kStopped:
      break;
  }
  return ErrorAnswer(503, "shutting_down", "the server is shutting down");
}

RouteHandler InvocationRoute(InvocationServices services) {
  return [services](const RequestHead& head) {
    const ServerConfig& config = *services.config;
    const std::string_view attributes = Field(head, kCustomAttributes);
    // Parsed first: the header is echoed only when it is within SageMaker's limits.
    const PredictOptions options =
        ParseCustomAttributes(attributes, config.default_options, config.max_detections_cap);
    HttpHeaders echo;
    if (!attributes.empty()) {
      echo.emplace_back(kCustomAttributes, std::string(attributes));
    }
    BodyKind kind = BodyKind::kImage;
    try {
      kind = ClassifyContentType(Field(head, "Content-Type"));
      RequireAcceptable(Field(head, "Accept"), ResponseMediaType(kind));
      if (!services.executor->Ready()) {
        throw HttpError(503, "not_ready",
                        "the model is still loading or warming up; poll GET /ping until it "
                        "answers 200");
      }
    } catch (HttpError& e) {
      e.AddHeaders(echo);
      throw;
    }
    Exchange exchange;
    exchange.headers = std::move(echo);
    const Clock::time_point deadline = head.received_at + config.request_deadline;
    exchange.deadline = deadline;
    exchange.deadline_answer = DeadlineExceededAnswer(config);
    exchange.run = [services, kind, options, deadline](std::vector<uint8_t> body, Reply reply) {
      Admission admission = services.lifecycle->TryAdmit();
      if (!admission) {
        reply(NotAdmittedAnswer(*services.lifecycle));
        return;
      }
      net::post(*services.cpu_pool, [services, kind, options, deadline, admission,
                                     body = std::move(body), reply = std::move(reply)]() mutable {
        if (kind == BodyKind::kJsonLines) {
          MultiRecordRun::Start(std::move(body), options, deadline, services, std::move(admission),
                                std::move(reply));
        } else {
          RunSingleRequest(services, std::move(body), kind, options, deadline, std::move(admission),
                           std::move(reply));
        }
      });
    };
    return exchange;
  };
}

}  // namespace mrcnn::serving
