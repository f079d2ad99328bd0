// redis_url.cc — parsing of the Redis URL forms the store accepts, and the failure-policy
// names (see include/ratelimit/redis_store.h). Pure code: no I/O.
//
// Forms: redis://[user:password@]host[:port][/db]   (host: name, IPv4, or [IPv6])
//        rediss://... and rediss-cluster://...: the same over TLS
//        redis-sentinel://[user:password@]host[:port][,host[:port]...]/master-name[/db]
//        unix://[user:password@]/path/to/socket[?db=N]
//        redis-cluster://[user:password@]host[:port][,host[:port]...][/0]
// Invariant: an error message never contains the password.
#include <charconv>
#include <string>

#include "ratelimit/redis_store.h"

namespace ratelimit {
namespace {

constexpr int kMaxDb = 1'000'000;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (user names and passwords may contain '@', ':' or '/').
Result<std::string> percent_decode(std::string_view s, const char* what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) {
      return Status::invalid_argument(std::string("invalid %-escape in the URL's ") + what);
    }
    int hi = hex_value(s[i + 1]);
    int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) {
      return Status::invalid_argument(std::string("invalid %-escape in the URL's ") + what);
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

Result<int> parse_db(std::string_view s) {
  int db = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), db);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || db < 0 || db > kMaxDb) {
    return Status::invalid_argument("invalid database number '" + std::string(s) +
                                    "' in Redis URL (expected 0 ... 1000000)");
  }
  return db;
}

// Splits "user:password@rest" into credentials and rest. No '@' -> no credentials.
Status take_credentials(std::string_view& rest, RedisUrl& url) {
  const size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return {};
  std::string_view cred = rest.substr(0, at);
  rest = rest.substr(at + 1);
  const size_t colon = cred.find(':');
  if (colon == std::string_view::npos) {
    return Status::invalid_argument(
        "Redis URL credentials must be 'user:password@' or ':password@'");
  }
  auto user = percent_decode(cred.substr(0, colon), "user name");
  if (!user.ok()) return user.status();
  auto password = percent_decode(cred.substr(colon + 1), "password");
  if (!password.ok()) return password.status();
  url.user = std::move(*user);
  url.password = std::move(*password);
  url.has_password = true;
  return {};
}

// "host[:port]" (host: name, IPv4 or [IPv6]); `port` keeps its default when none is given.
Status parse_host_port(std::string_view authority, std::string& host_out, uint16_t& port_out) {
  std::string_view host = authority;
  std::string_view port_text;
  if (host.starts_with("[")) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return Status::invalid_argument("Redis URL has an unterminated [IPv6] address");
    }
    std::string_view after = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::invalid_argument("Redis URL: expected ':port' after ]");
      port_text = after.substr(1);
      if (port_text.empty()) return Status::invalid_argument("Redis URL has an empty port");
    }
  } else {
    const size_t colon = host.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = host.substr(colon + 1);
      host = host.substr(0, colon);
      if (port_text.empty()) return Status::invalid_argument("Redis URL has an empty port");
    }
  }
  if (host.empty()) return Status::invalid_argument("Redis URL has no host");
  for (char c : host) {
    if (c == '/' || c == '@' || c == '?' || c == '#' || c == ' ' ||
        static_cast<unsigned char>(c) < 0x20) {
      return Status::invalid_argument("Redis URL host '" + std::string(host) +
                                      "' contains an invalid character");
    }
  }
  host_out = std::string(host);
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return Status::invalid_argument("invalid port '" + std::string(port_text) +
                                      "' in Redis URL (expected 1 ... 65535)");
    }
    port_out = static_cast<uint16_t>(port);
  }
  return {};
}

constexpr uint16_t kSentinelPort = 26379;

// The part after "redis-sentinel://". Each sentinel is parsed as a redis:// authority (one
// parser of host and port); the credentials and the db are the master's.
Result<RedisUrl> parse_sentinel_url(std::string_view rest) {
  RedisUrl url;
  url.is_sentinel = true;
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 >= rest.size()) {
    return Status::invalid_argument(
        "redis-sentinel:// URL needs the master's name after the sentinels, e.g. "
        "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster");
  }
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  if (auto s = take_credentials(authority, url); !s.is_ok()) return s;
  const size_t db_slash = path.find('/');
  url.master_name = std::string(path.substr(0, db_slash));
  if (url.master_name.empty()) {
    return Status::invalid_argument("redis-sentinel:// URL has an empty master name");
  }
  for (char c : url.master_name) {
    if (c == ' ' || c == '?' || c == '#' || static_cast<unsigned char>(c) < 0x20) {
      return Status::invalid_argument("redis-sentinel:// master name '" + url.master_name +
                                      "' contains an invalid character");
    }
  }
  if (db_slash != std::string_view::npos) {
    auto db = parse_db(path.substr(db_slash + 1));
    if (!db.ok()) return db.status();
    url.db = *db;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = authority.find(',', start);
    std::string_view one = authority.substr(start, comma - start);
    if (one.empty()) return Status::invalid_argument("redis-sentinel:// URL has an empty host");
    if (one.find_first_of("@/") != std::string_view::npos) {
      return Status::invalid_argument("redis-sentinel:// sentinel '" + std::string(one) +
                                      "' contains an invalid character");
    }
    auto parsed = parse_redis_url("redis://" + std::string(one));
    if (!parsed.ok()) return parsed.status();
    const bool has_port = one.starts_with('[') ? one.find("]:") != std::string_view::npos
                                               : one.find(':') != std::string_view::npos;
    url.seeds.push_back(RedisSeed{parsed->host, has_port ? parsed->port : kSentinelPort});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  url.host = url.seeds.front().host;
  url.port = url.seeds.front().port;
  return url;
}

// unix://[cred@]/path[?db=N]: everything after the scheme, into `url`.
Status parse_unix_rest(std::string_view rest, RedisUrl& url) {
  // The credentials end at the '@' before the path's first '/'.
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return Status::invalid_argument("unix:// URL needs an absolute socket path, e.g. "
                                    "unix:///run/redis/redis.sock");
  }
  if (slash > 0) {
    std::string_view cred_part = rest.substr(0, slash);
    if (cred_part.back() != '@') {
      return Status::invalid_argument("unix:// URL needs an absolute socket path, e.g. "
                                      "unix:///run/redis/redis.sock");
    }
    std::string_view cred_rest = rest.substr(0, slash);
    if (auto s = take_credentials(cred_rest, url); !s.is_ok()) return s;
    rest = rest.substr(slash);
  }
  const size_t q = rest.find('?');
  std::string_view path = rest.substr(0, q);
  if (path.size() < 2) return Status::invalid_argument("unix:// URL has an empty socket path");
  url.path = std::string(path);
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    if (!query.starts_with("db=")) {
      return Status::invalid_argument("unix:// URL accepts only the query '?db=N'");
    }
    auto db = parse_db(query.substr(3));
    if (!db.ok()) return db.status();
    url.db = *db;
  }
  return {};
}

// redis-cluster://'s node list host:port,host:port, into url.seeds.
Status parse_cluster_seeds(std::string_view authority, RedisUrl& url) {
  size_t start = 0;
  for (;;) {
    const size_t comma = authority.find(',', start);
    std::string_view one = authority.substr(start, comma == std::string_view::npos
                                                       ? std::string_view::npos
                                                       : comma - start);
    if (one.empty()) {
      return Status::invalid_argument(
          "redis-cluster:// URL has an empty node in its list (expected host:port,host:port)");
    }
    RedisSeed seed;
    if (Status st = parse_host_port(one, seed.host, seed.port); !st.is_ok()) return st;
    url.seeds.push_back(std::move(seed));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return {};
}

}  // namespace

Result<RedisUrl> parse_redis_url(std::string_view text) {
  // rediss:// and rediss-cluster:// are their plain forms over TLS.
  if (text.starts_with("rediss://") || text.starts_with("rediss-cluster://")) {
    auto plain = parse_redis_url("redis" + std::string(text.substr(6)));
    if (plain.ok()) plain->tls = true;
    return plain;
  }
  constexpr std::string_view kSentinel = "redis-sentinel://";
  if (text.starts_with(kSentinel)) return parse_sentinel_url(text.substr(kSentinel.size()));
  RedisUrl url;
  constexpr std::string_view kRedis = "redis://";
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kCluster = "redis-cluster://";
  std::string_view rest;
  if (text.starts_with(kRedis)) {
    rest = text.substr(kRedis.size());
  } else if (text.starts_with(kUnix)) {
    rest = text.substr(kUnix.size());
    url.is_unix = true;
  } else if (text.starts_with(kCluster)) {
    rest = text.substr(kCluster.size());
    url.is_cluster = true;
  } else {
    return Status::invalid_argument(
        "Redis URL must start with redis://, unix:// or redis-cluster:// (e.g. "
        "redis://127.0.0.1:6379/0, unix:///run/redis/redis.sock or "
        "redis-cluster://10.0.0.1:7000,10.0.0.2:7000)");
  }

  if (url.is_unix) {
    if (Status st = parse_unix_rest(rest, url); !st.is_ok()) return st;
    return url;
  }

  // redis://[cred@]host[:port][/db]
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (auto s = take_credentials(authority, url); !s.is_ok()) return s;
  if (slash != std::string_view::npos) {
    std::string_view db_text = rest.substr(slash + 1);
    if (!db_text.empty()) {
      auto db = parse_db(db_text);
      if (!db.ok()) return db.status();
      url.db = *db;
    }
  }
  if (url.is_cluster) {
    if (url.db != 0) {
      return Status::invalid_argument(
          "Redis Cluster has only database 0: remove '/" + std::to_string(url.db) +
          "' from the redis-cluster:// URL (use key_prefix to separate deployments)");
    }
    if (Status st = parse_cluster_seeds(authority, url); !st.is_ok()) return st;
    url.host = url.seeds.front().host;
    url.port = url.seeds.front().port;
    return url;
  }
  if (authority.find(',') != std::string_view::npos) {
    return Status::invalid_argument(
        "several hosts in a redis:// URL: use redis-cluster://host:port,host:port for a cluster");
  }
  if (Status st = parse_host_port(authority, url.host, url.port); !st.is_ok()) return st;
  return url;
}

}  // namespace ratelimit
