// store_factory.cc — memory or Redis store from a StoreConfig (see store_factory.h).
#include "store_factory.h"

#include <string>

#include "ratelimit/memory_store.h"

namespace ratelimit::server {
namespace {

void gauge(std::string& out, const char* name, const char* type, const char* help, uint64_t v) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

}  // namespace

Result<OpenedStore> open_store(const StoreConfig& config, Metrics& metrics) {
  if (config.type == StoreType::kMemory) {
    MemoryStoreOptions o;
    o.max_keys = config.max_keys;
    o.shards = config.shards;
    auto store = std::make_shared<MemoryStore>(o);
    std::weak_ptr<MemoryStore> weak = store;
    metrics.set_extra([weak](std::string& out) {
      auto s = weak.lock();
      if (!s) return;
      gauge(out, "ratelimitd_memory_store_keys", "gauge", "Keys held by the memory store.", s->key_count());
      gauge(out, "ratelimitd_memory_store_evictions_total", "counter",
            "Keys evicted from the memory store because store.max_keys was reached.", s->evictions());
    });
    OpenedStore opened;
    opened.memory = store.get();
    opened.store = std::move(store);
    return opened;
  }
  return open_redis_store(config, metrics);
}

}  // namespace ratelimit::server
