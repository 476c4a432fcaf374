#include "trainer/engine/distributed/process_world.h"

#include <unistd.h>

#include <stdexcept>

#include "common/config_error.h"

namespace mrcnn::engine {
namespace {

int64_t EnvInt(const common::EnvMap& env, const std::string& key, int64_t fallback) {
  return common::EnvInteger(env, key).value_or(fallback);
}

}  // namespace

ProcessWorld ProcessWorld::FromEnv(const common::EnvMap& env) {
  ProcessWorld w;
  w.world_size = EnvInt(env, "WORLD_SIZE", 1);
  w.rank = EnvInt(env, "RANK", 0);
  w.local_rank = EnvInt(env, "LOCAL_RANK", 0);
  if (w.world_size < 1)
    throw common::ConfigError("environment", "WORLD_SIZE", "must be >= 1");
  if (w.rank < 0 || w.rank >= w.world_size) {
    throw common::ConfigError("environment", "RANK", "must be in [0, WORLD_SIZE)");
  }
  if (auto a = common::Lookup(env, "MASTER_ADDR"); a && !a->empty())
    w.master_addr = *a;
  w.master_port = static_cast<int>(EnvInt(env, "MASTER_PORT", 29500));
  // torch compares the variable with str(True); any case is accepted here.
  if (auto agent = common::Lookup(env, "TORCHELASTIC_USE_AGENT_STORE");
      agent && (*agent == "True" || *agent == "true" || *agent == "TRUE" || *agent == "1")) {
    const int64_t attempt = EnvInt(env, "TORCHELASTIC_RESTART_COUNT", 0);
    if (attempt < 0) {
      throw common::ConfigError("environment", "TORCHELASTIC_RESTART_COUNT", "must be >= 0");
    }
    w.agent_store_prefix = "/worker/attempt_" + std::to_string(attempt);
  }
  if (auto h = common::Lookup(env, "SM_CURRENT_HOST"); h && !h->empty()) {
    w.host = *h;
  } else {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0)
      w.host = name;
  }
  return w;
}

}  // namespace mrcnn::engine
