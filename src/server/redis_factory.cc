// redis_factory.cc — the Redis half of store_factory: RedisStoreOptions from the config and
// the Redis counters on /metrics.
#include <string>

#include "ratelimit/redis_store.h"
#include "store_factory.h"

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

std::chrono::milliseconds ceil_ms(Micros d) {
  return std::chrono::milliseconds((d.count() + 999) / 1000);
}

}  // namespace

Result<OpenedStore> open_redis_store(const StoreConfig& config, Metrics& metrics) {
  RedisStoreOptions o;
  o.url = config.url;
  o.connections = config.connections;
  o.connect_timeout = ceil_ms(config.connect_timeout);
  o.command_timeout = ceil_ms(config.command_timeout);
  o.on_failure = config.on_failure;
  o.key_prefix = config.key_prefix;
  auto store = RedisStore::connect(std::move(o));
  if (!store) return store.status();
  std::weak_ptr<RedisStore> weak = *store;
  metrics.set_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    const RedisStoreCounters c = s->counters();
    gauge(out, "ratelimitd_redis_commands_total", "counter", "Script calls answered by Redis.", c.commands);
    gauge(out, "ratelimitd_redis_errors_total", "counter", "Redis calls that failed (timeout, connection, error reply).", c.errors);
    gauge(out, "ratelimitd_redis_timeouts_total", "counter", "Redis calls whose command timeout expired.", c.timeouts);
    gauge(out, "ratelimitd_redis_failed_open_total", "counter", "Decisions admitted by the fail-open policy.", c.failed_open);
    gauge(out, "ratelimitd_redis_failed_closed_total", "counter", "Decisions denied by the fail-closed policy.", c.failed_closed);
    gauge(out, "ratelimitd_redis_connects_total", "counter", "Redis connections opened (first ones included).", c.connects);
    gauge(out, "ratelimitd_redis_ready_connections", "gauge", "Redis connections open and ready.", s->ready_connections());
  });
  OpenedStore opened;
  opened.store = *store;
  return opened;
}

}  // namespace ratelimit::server
