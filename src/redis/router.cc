// router.cc — the router factory: which Router a URL asks for (see router.h).
#include "router.h"

#include "cluster_router.h"
#include "sentinel_router.h"
#include "standalone_router.h"

namespace ratelimit::redis_detail {

std::string display_url(const RedisUrl& u) {
  if (u.is_cluster) {
    std::string out = u.tls ? "rediss-cluster://" : "redis-cluster://";
    for (size_t i = 0; i < u.seeds.size(); ++i) {
      Endpoint e;
      e.host = u.seeds[i].host;
      e.port = u.seeds[i].port;
      out += (i > 0 ? "," : "") + e.address();
    }
    return out;
  }
  if (u.is_sentinel) {
    std::string out = "redis-sentinel://";
    for (size_t i = 0; i < u.seeds.size(); ++i) {
      Endpoint e;
      e.host = u.seeds[i].host;
      e.port = u.seeds[i].port;
      out += (i > 0 ? "," : "") + e.address();
    }
    return out + "/" + u.master_name + "/" + std::to_string(u.db);
  }
  if (u.is_unix) return "unix://" + u.path + (u.db != 0 ? "?db=" + std::to_string(u.db) : "");
  const bool v6 = u.host.find(':') != std::string::npos;
  return std::string(u.tls ? "rediss://" : "redis://") + (v6 ? "[" + u.host + "]" : u.host) +
         ":" + std::to_string(u.port) + "/" + std::to_string(u.db);
}

std::shared_ptr<const ConnectionConfig> connection_config(const Endpoint& endpoint,
                                                          std::string display,
                                                          const RouterOptions& options) {
  auto c = std::make_shared<ConnectionConfig>();
  c->endpoint = endpoint;
  c->display = std::move(display);
  c->connect_timeout = options.connect_timeout;
  c->command_timeout = options.command_timeout;
  c->backoff_min = options.backoff_min;
  c->backoff_max = options.backoff_max;
  c->handshake = options.handshake;
  c->make_stream = options.make_stream;
  return c;
}

Result<std::unique_ptr<Router>> make_router(const RedisUrl& url, RouterOptions options,
                                            RouterCounters& counters) {
  if (url.is_sentinel) {
    SentinelConfig sc;
    sc.master_name = url.master_name;
    sc.master.user = url.user;
    sc.master.password = url.password;
    sc.master.has_password = url.has_password;
    sc.master.db = url.db;
    for (const auto& seed : url.seeds) {
      Endpoint s;
      s.host = seed.host;
      s.port = seed.port;
      s.user = options.sentinel_user;
      s.password = options.sentinel_password;
      s.has_password = !options.sentinel_password.empty();
      sc.sentinels.push_back(std::move(s));
    }
    return std::unique_ptr<Router>(
        std::make_unique<SentinelRouter>(std::move(sc), options, counters));
  }
  Endpoint e;
  e.is_unix = url.is_unix;
  e.host = url.host;
  e.port = url.port;
  e.path = url.path;
  e.user = url.user;
  e.password = url.password;
  e.has_password = url.has_password;
  e.db = url.db;
  if (url.is_cluster) {
    if (url.db != 0) return Status::invalid_argument("Redis Cluster has only database 0");
    std::vector<Endpoint> seeds;
    for (const RedisSeed& s : url.seeds) {
      Endpoint seed = e;
      seed.host = s.host;
      seed.port = s.port;
      seeds.push_back(std::move(seed));
    }
    if (seeds.empty()) return Status::invalid_argument("redis-cluster:// URL without a node");
    return std::unique_ptr<Router>(
        std::make_unique<ClusterRouter>(std::move(seeds), display_url(url), options, counters));
  }
  return std::unique_ptr<Router>(
      std::make_unique<StandaloneRouter>(e, display_url(url), options, counters));
}

}  // namespace ratelimit::redis_detail
