#include "serving/routes/multi_model_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <memory>
#include <nlohmann/json.hpp>

#include "serving/codec/request_decoding.h"
#include "serving/http/log_line.h"
#include "serving/routes/invocation_route.h"

namespace mrcnn::serving {
namespace {

namespace http = boost::beast::http;
namespace net = boost::asio;

constexpr size_t kMaxNameBytes = 1024;
constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

RouteAnswer Json(unsigned status, const nlohmann::json& body) {
  return RouteAnswer{status,
                     body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                     "application/json",
                     {}};
}

std::string ModelName(const RequestHead& head) {
  const auto it = head.params.find("name");
  return it == head.params.end() ? std::string() : PercentDecode(it->second);
}

// The query of the request target, as key -> raw value.
std::map<std::string, std::string> Query(const RequestHead& head) {
  std::map<std::string, std::string> query;
  const std::string_view target(head.fields.target().data(), head.fields.target().size());
  const auto mark = target.find('?');
  if (mark == std::string_view::npos)
    return query;
  std::string_view rest = target.substr(mark + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    query[PercentDecode(pair.substr(0, eq))] =
        eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
    if (amp == std::string_view::npos)
      break;
    rest.remove_prefix(amp + 1);
  }
  return query;
}

std::string Hex(std::string_view text) {
  std::string out;
  for (unsigned char c : text)
    out += fmt::format("{:02x}", c);
  return out;
}

// The page token is the hex of the last name of the previous page: opaque to the caller,
// and stable when models are loaded or unloaded between pages.
std::string UnHexToken(std::string_view token) {
  std::string out;
  if (token.size() % 2 != 0)
    throw HttpError(400, "bad_request", "next_page_token is not one this server gave out");
  for (size_t i = 0; i < token.size(); i += 2) {
    unsigned value = 0;
    const auto [end, error] = std::from_chars(token.data() + i, token.data() + i + 2, value, 16);
    if (error != std::errc() || end != token.data() + i + 2)
      throw HttpError(400, "bad_request", "next_page_token is not one this server gave out");
    out += static_cast<char>(value);
  }
  return out;
}

int PageSize(const std::map<std::string, std::string>& query) {
  const auto it = query.find("limit");
  if (it == query.end())
    return kDefaultPageSize;
  int limit = 0;
  const auto [end, error] =
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), limit);
  if (error != std::errc() || end != it->second.data() + it->second.size() || limit < 1 ||
      limit > kMaxPageSize) {
    throw HttpError(400, "bad_request",
                    fmt::format("limit must be a whole number from 1 to {}, got \"{}\"",
                                kMaxPageSize, it->second));
  }
  return limit;
}

nlohmann::json Describe(const HostedModels::ModelInfo& info) {
  return {{"modelName", info.name}, {"modelUrl", info.url}};
}

// {"model_name": non-empty, no '/' or control characters, "url": non-empty}.
std::pair<std::string, std::string> ParseLoadBody(const std::vector<uint8_t>& body) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, "bad_json_body",
                    fmt::format("POST /models: the body must be JSON {{\"model_name\": ..., "
                                "\"url\": ...}}: {}",
                                e.what()));
  }
  auto text = [&doc](const char* key) {
    if (!doc.is_object() || !doc.contains(key) || !doc[key].is_string() ||
        doc[key].get_ref<const std::string&>().empty()) {
      throw HttpError(400, "bad_json_body",
                      fmt::format("POST /models: \"{}\" must be a non-empty string", key));
    }
    return doc[key].get<std::string>();
  };
  std::string name = text("model_name");
  std::string url = text("url");
  if (name.size() > kMaxNameBytes || std::any_of(name.begin(), name.end(), [](char c) {
        return c == '/' || static_cast<unsigned char>(c) < 0x20;
      })) {
    throw HttpError(400, "bad_json_body",
                    fmt::format("POST /models: \"model_name\" must be at most {} bytes without "
                                "'/' or control characters (it becomes a path segment)",
                                kMaxNameBytes));
  }
  return {std::move(name), std::move(url)};
}

RouteAnswer LoadAnswer(const std::string& name, const std::string& url,
                       const HostedModels::LoadResult& result) {
  using Status = HostedModels::LoadStatus;
  switch (result.status) {
    case Status::kLoaded:
      return Json(200, {{"modelName", name},
                        {"modelUrl", url},
                        {"loadTimeMs", result.load_time.count()},
                        {"evicted", result.evicted}});
    case Status::kAlreadyLoaded:
      return ErrorAnswer(409, "model_already_loaded", result.detail);
    case Status::kNotFound:
      return ErrorAnswer(404, "model_dir_not_found", result.detail);
    case Status::kBadModel:
      return ErrorAnswer(400, "bad_model", result.detail);
    case Status::kInsufficientMemory:
      return ErrorAnswer(507, "insufficient_memory", result.detail);
  }
  return ErrorAnswer(500, "internal_error", "unknown load status");
}

}  // namespace

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    const char* first = text.data() + i + 1;
    if (i + 2 >= text.size() || std::from_chars(first, first + 2, value, 16).ptr != first + 2) {
      throw HttpError(400, "bad_request",
                      fmt::format("malformed percent escape in \"{}\"", std::string(text)));
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

MultiModelRoutes::MultiModelRoutes(RouteTable& table, const ServerConfig& config,
                                   HostedModels& models, ServerLifecycle& lifecycle,
                                   net::thread_pool& cpu_pool) {
  table.Add(http::verb::post, "/models", [this, &models](const RequestHead&) {
    Exchange exchange;
    exchange.run = [this, &models](std::vector<uint8_t> body, Reply reply) {
      net::post(admin_pool_, [&models, body = std::move(body), reply = std::move(reply)] {
        try {
          const auto [name, url] = ParseLoadBody(body);
          reply(LoadAnswer(name, url, models.Load(name, url)));
        } catch (const HttpError& e) {
          reply(ErrorAnswer(e));
        } catch (const std::exception& e) {
          reply(ErrorAnswer(500, "internal_error", e.what()));
        }
      });
    };
    return exchange;
  });
  table.Add(http::verb::get, "/models", [&models](const RequestHead& head) {
    const auto query = Query(head);
    const int limit = PageSize(query);
    std::string after;
    if (const auto it = query.find("next_page_token"); it != query.end() && !it->second.empty())
      after = UnHexToken(it->second);
    nlohmann::json page = nlohmann::json::array();
    std::string last;
    bool more = false;
    for (const auto& info : models.List()) {
      if (!after.empty() && info.name <= after)
        continue;
      if (static_cast<int>(page.size()) == limit) {
        more = true;
        break;
      }
      page.push_back(Describe(info));
      last = info.name;
    }
    nlohmann::json answer = {{"models", page}};
    if (more)
      answer["nextPageToken"] = Hex(last);
    return ImmediateExchange(Json(200, answer));
  });
  table.Add(http::verb::get, "/models/{name}", [&models](const RequestHead& head) {
    const std::string name = ModelName(head);
    const auto info = models.Find(name);
    if (!info)
      throw HttpError(404, "model_not_found", fmt::format("no model {} is loaded", name));
    return ImmediateExchange(Json(200, Describe(*info)));
  });
  table.Add(http::verb::delete_, "/models/{name}", [this, &models](const RequestHead& head) {
    const std::string name = ModelName(head);
    if (!models.Find(name))
      throw HttpError(404, "model_not_found", fmt::format("no model {} is loaded", name));
    Exchange exchange;
    exchange.run = [this, &models, name](std::vector<uint8_t>, Reply reply) {
      net::post(admin_pool_, [&models, name, reply = std::move(reply)] {
        if (models.Unload(name)) {
          reply(Json(200, {{"modelName", name}, {"unloaded", true}}));
        } else {  // a concurrent DELETE won
          reply(ErrorAnswer(404, "model_not_found", fmt::format("no model {} is loaded", name)));
        }
      });
    };
    return exchange;
  });
  table.Add(
      http::verb::post, "/models/{name}/invoke",
      [&config, &models, &lifecycle, &cpu_pool](const RequestHead& head) {
        const std::string name = ModelName(head);
        auto lease = std::make_shared<HostedModels::Lease>(models.Acquire(name));
        if (!*lease) {
          throw HttpError(404, "model_not_found",
                          fmt::format("no model {} is loaded; load it with POST /models", name));
        }
        if (config.access_log) {
          const auto target = head.fields["X-Amzn-SageMaker-Target-Model"];
          LogLine("invoke model {} (X-Amzn-SageMaker-Target-Model: {})", name,
                  std::string_view(target.data(), target.size()));
        }
        // The /invocations handler over this model's executor; the lease travels with
        // the request until it is answered, so an unload waits for it.
        Exchange exchange =
            InvocationRoute({&config, &lease->executor(), &lifecycle, &cpu_pool})(head);
        exchange.run = [run = std::move(exchange.run), lease](std::vector<uint8_t> body,
                                                              Reply reply) {
          run(std::move(body),
              [reply = std::move(reply), lease](RouteAnswer answer) { reply(std::move(answer)); });
        };
        return exchange;
      });
}

MultiModelRoutes::~MultiModelRoutes() {
  admin_pool_.join();
}

}  // namespace mrcnn::serving
