// config_test.cc — the YAML loader: what must load (DESIGN.md's example, examples/ratelimit.yaml)
// and what must be refused with "file:line: reason" (unknown keys, wrong types, bad ranges,
// duplicate names), plus command-line overrides and what a reload may change.
#include <gtest/gtest.h>

#include "../yaml/alias_bomb.h"
#include "config.h"

namespace ratelimit::server {
namespace {

Status fails(std::string_view yaml) {
  auto c = parse_config(yaml, "cfg.yaml");
  EXPECT_FALSE(c.ok()) << "expected a refusal for:\n" << yaml;
  return c.ok() ? Status() : c.status();
}

void expect_error(std::string_view yaml, std::string_view prefix, std::string_view words) {
  const Status s = fails(yaml);
  EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << s.message();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

TEST(Config, DesignExampleLoads) {
  const char* yaml = R"(listen: 127.0.0.1:8080
store: { type: memory }            # or { type: redis, url: redis://127.0.0.1:6379/0, on_failure: open }
policies:
  api:     { algorithm: sliding_window_log, limit: 10, window: 60s }
  uploads: { algorithm: token_bucket, rate: 10, burst: 20 }
)";
  auto c = parse_config(yaml, "design.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->listen.host, "127.0.0.1");
  EXPECT_EQ(c->listen.port, 8080);
  EXPECT_EQ(c->store.type, StoreType::kMemory);
  ASSERT_EQ(c->policies.size(), 2u);
  const PolicyConfig* api = c->find_policy("api");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->policy.algorithm(), Algorithm::kSlidingWindowLog);
  EXPECT_EQ(api->policy.limit(), 10);
  EXPECT_EQ(api->policy.window(), Micros{60'000'000});
  EXPECT_EQ(api->policy.name(), "api");
  const PolicyConfig* up = c->find_policy("uploads");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->policy.algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(up->policy.limit(), 20);
  EXPECT_DOUBLE_EQ(up->policy.rate(), 10.0);
  EXPECT_FALSE(c->admin_token.has_value());
}

TEST(Config, ExampleFileLoads) {
  auto c = load_config(std::string(RATELIMIT_SOURCE_DIR) + "/examples/ratelimit.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->listen.port, 8080);
  EXPECT_TRUE(c->find_policy("new_limit")->shadow);
  EXPECT_TRUE(c->find_policy("login")->policy.count_denied());
  EXPECT_EQ(c->find_policy("shaped")->policy.leaky_mode(), LeakyMode::kShape);
}

TEST(Config, EverySettingIsRead) {
  auto c = parse_config(R"(listen: "[::1]:9000"
threads: 3
store: { type: redis, url: "redis://10.0.0.1:6380/2", pool: 8, connect_timeout: 2s,
         command_timeout: 100ms, on_failure: closed, key_prefix: "x:" }
policies:
  a: { algorithm: leaky_bucket, rate: 0.5, burst: 3, mode: police, shadow: true }
admin_token: "0123456789abcdef0123"
limits: { max_body_bytes: 1024, max_header_bytes: 2048, max_key_length: 64, max_cost: 50,
          request_timeout: 3s, idle_timeout: 5s, max_connections: 7 }
forward_auth: { key_header: X-User-Id }
)", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->listen.host, "::1");
  EXPECT_EQ(c->listen.port, 9000);
  EXPECT_EQ(c->threads, 3u);
  EXPECT_EQ(c->store.type, StoreType::kRedis);
  EXPECT_EQ(c->store.url, "redis://10.0.0.1:6380/2");
  EXPECT_EQ(c->store.connections, 8u);
  EXPECT_EQ(c->store.connect_timeout, Micros{2'000'000});
  EXPECT_EQ(c->store.command_timeout, Micros{100'000});
  EXPECT_EQ(c->store.on_failure, FailurePolicy::kClosed);
  EXPECT_EQ(c->store.key_prefix, "x:");
  EXPECT_TRUE(c->find_policy("a")->shadow);
  EXPECT_EQ(*c->admin_token, "0123456789abcdef0123");
  EXPECT_EQ(c->limits.max_body_bytes, 1024u);
  EXPECT_EQ(c->limits.max_header_bytes, 2048u);
  EXPECT_EQ(c->limits.max_key_length, 64u);
  EXPECT_EQ(c->limits.max_cost, 50);
  EXPECT_EQ(c->limits.request_timeout, Micros{3'000'000});
  EXPECT_EQ(c->limits.idle_timeout, Micros{5'000'000});
  EXPECT_EQ(c->limits.max_connections, 7u);
  EXPECT_EQ(c->forward_auth_key_header, "X-User-Id");
}

TEST(Config, RedisTlsSentinelAndEvictionSettingsAreRead) {
  auto c = parse_config(R"(store:
  type: redis
  url: rediss://:pw@cache.internal:6380/0
  tls: { ca_file: /etc/rl/ca.pem, cert_file: /etc/rl/c.pem, key_file: /etc/rl/c.key,
         server_name: cache.internal, verify: false }
  require_noeviction: true
policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}
)", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->store.tls.ca_file, "/etc/rl/ca.pem");
  EXPECT_EQ(c->store.tls.cert_file, "/etc/rl/c.pem");
  EXPECT_EQ(c->store.tls.key_file, "/etc/rl/c.key");
  EXPECT_EQ(c->store.tls.server_name, "cache.internal");
  EXPECT_FALSE(c->store.tls.verify);
  EXPECT_TRUE(c->store.require_noeviction);

  auto s = parse_config("store: {type: redis, url: \"redis-sentinel://s1:26379,s2/mymaster/1\", "
                        "sentinel_password: spw}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
                        "c.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->store.sentinel_password, "spw");
  EXPECT_TRUE(RedisTlsOptions{}.verify) << "verification is on by default";

  expect_error("store: {type: redis, tls: {ca: x}}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "ca");
  expect_error("store: {type: redis, tls: {cert_file: x}}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "go together");
  expect_error("store: {type: redis, tls: {verify: maybe}}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "verify");
  expect_error("store: {type: redis, url: \"redis-sentinel://s1:26379\"}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "master");
  expect_error("store: {type: memory, require_noeviction: true}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "only to type: redis");
}

TEST(Config, DenialCacheIsOffByDefaultAndReadForEitherStore) {
  const std::string policies = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n";
  auto off = parse_config("store: {type: redis}\n" + policies, "c.yaml");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->store.denial_cache.enabled);

  auto defaults = parse_config("store: {type: redis, denial_cache: {}}\n" + policies, "c.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_TRUE(defaults->store.denial_cache.enabled);
  EXPECT_EQ(defaults->store.denial_cache.max_entries, 100'000u);
  EXPECT_EQ(defaults->store.denial_cache.max_ttl, Micros{1'000'000});

  auto set = parse_config("store: {type: memory, denial_cache: {max_entries: 5000, max_ttl: 250ms}}\n" + policies,
                          "c.yaml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->store.denial_cache.enabled);
  EXPECT_EQ(set->store.denial_cache.max_entries, 5000u);
  EXPECT_EQ(set->store.denial_cache.max_ttl, Micros{250'000});

  expect_error("store: {type: redis, denial_cache: {max_entries: 0}}\n" + policies, "cfg.yaml:1: ", "max_entries");
  expect_error("store: {type: redis, denial_cache: {max_ttl: 500us}}\n" + policies, "cfg.yaml:1: ",
               "between 1ms and 366d");
  expect_error("store: {type: redis, denial_cache: {max_ttl: 400d}}\n" + policies, "cfg.yaml:1: ",
               "between 1ms and 366d");
  expect_error("store: {type: redis, denial_cache: {ttl: 1s}}\n" + policies, "cfg.yaml:1: ",
               "unknown key 'ttl' in store.denial_cache");
  expect_error("store: {type: redis, denial_cache: true}\n" + policies, "cfg.yaml:1: ",
               "store.denial_cache must be a mapping");
}

TEST(Config, UnknownKeysAreRefusedWithTheirLine) {
  expect_error("listen: 127.0.0.1:1\nlisen: 1\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:2: ", "unknown key 'lisen'");
  expect_error("policies:\n  a:\n    algorithm: fixed_window\n    limt: 1\n    window: 1s\n",
               "cfg.yaml:4: ", "unknown key 'limt'");
  expect_error("store: {type: memory, max_key: 5}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
               "cfg.yaml:1: ", "unknown key 'max_key'");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\nlimits:\n  max_bodybytes: 5\n",
               "cfg.yaml:3: ", "unknown key 'max_bodybytes'");
}

TEST(Config, WrongTypesAndRangesAreRefused) {
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 10.5, window: 1s}\n", "cfg.yaml:2: ", "whole number");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 0, window: 1s}\n", "cfg.yaml:2: ", "between 1 and");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: ten, window: 1s}\n", "cfg.yaml:2: ", "'ten'");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 60}\n", "cfg.yaml:2: ", "missing unit");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 5 s}\n", "cfg.yaml:2: ", "window");
  expect_error("policies:\n  a: {algorithm: token_bucket, rate: fast, burst: 5}\n", "cfg.yaml:2: ", "must be a number");
  expect_error("policies:\n  a: {algorithm: token_bucket, rate: 0, burst: 5}\n", "cfg.yaml:2: ", "rate");
  expect_error("policies:\n  a: {algorithm: token_bucket, rate: .nan, burst: 5}\n", "cfg.yaml:2: ", "number");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s, shadow: yes}\n", "cfg.yaml:2: ", "true or false");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\nthreads: -1\n", "cfg.yaml:3: ", "threads");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\nlisten: 127.0.0.1\n", "cfg.yaml:3: ", "missing port");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\nlisten: example.com:80\n", "cfg.yaml:3: ", "literal IP");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\nlimits: {max_key_length: 513}\n", "cfg.yaml:3: ", "max_key_length");
}

// The hardening settings (issue 12): connection caps, first-byte timeout, admin listener,
// peek behind the token, the memory store's byte bound; defaults and refusals.
// store.when_saturated (issue 33): the operator's choice when a key flood saturates the memory
// store's eviction residue; refuse by default, a typo or a Redis store refused by name.
TEST(Config, MemoryStoreWhenSaturated) {
  const std::string pol = "policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\n";
  auto d = parse_config(pol, "cfg.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->store.when_saturated, SaturationChoice::kRefuse);
  for (auto [text, want] : {std::pair{"refuse", SaturationChoice::kRefuse}, std::pair{"admit", SaturationChoice::kAdmit}}) {
    auto c = parse_config(pol + "store: {type: memory, when_saturated: " + text + "}\n", "cfg.yaml");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->store.when_saturated, want) << text;
  }
  expect_error(pol + "store: {type: memory, when_saturated: allow}\n", "cfg.yaml:3: ", "store.when_saturated");
  expect_error(pol + "store: {type: redis, when_saturated: admit}\n", "cfg.yaml:3: ", "only to type: memory");
}

// store.snapshot (issue 33, counts across a restart): path, interval, on_corrupt; defaults,
// every refusal by name, and the memory store only.
TEST(Config, MemoryStoreSnapshot) {
  const std::string pol = "policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\n";
  auto none = parse_config(pol, "cfg.yaml");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->store.snapshot.has_value());
  auto d = parse_config(pol + "store: {type: memory, snapshot: {path: /var/lib/ratelimitd/counts.snap}}\n", "cfg.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(d->store.snapshot.has_value());
  EXPECT_EQ(d->store.snapshot->path, "/var/lib/ratelimitd/counts.snap");
  EXPECT_EQ(d->store.snapshot->interval, Micros{30'000'000});
  EXPECT_EQ(d->store.snapshot->on_corrupt, SnapshotCorrupt::kStartEmpty);
  auto c = parse_config(pol + "store: {type: memory, snapshot: {path: /s, interval: 0, on_corrupt: refuse}}\n",
                        "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->store.snapshot->interval, Micros{0});
  auto zero_s = parse_config(pol + "store: {type: memory, snapshot: {path: /s, interval: 0s}}\n", "cfg.yaml");
  ASSERT_TRUE(zero_s.ok()) << zero_s.status().message();
  EXPECT_EQ(zero_s->store.snapshot->interval, Micros{0});
  EXPECT_EQ(c->store.snapshot->on_corrupt, SnapshotCorrupt::kRefuse);
  expect_error(pol + "store: {type: memory, snapshot: {interval: 10s}}\n", "cfg.yaml:3: ", "'path' is required");
  expect_error(pol + "store: {type: memory, snapshot: {path: counts.snap}}\n", "cfg.yaml:3: ", "absolute file name");
  expect_error(pol + "store: {type: memory, snapshot: {path: /s, interval: 500ms}}\n", "cfg.yaml:3: ",
               "between 1s and 1d");
  expect_error(pol + "store: {type: memory, snapshot: {path: /s, on_corrupt: ignore}}\n", "cfg.yaml:3: ",
               "store.snapshot.on_corrupt must be refuse or start_empty");
  expect_error(pol + "store: {type: memory, snapshot: {path: /s, every: 1s}}\n", "cfg.yaml:3: ",
               "unknown key 'every' in store.snapshot");
  expect_error(pol + "store: {type: redis, snapshot: {path: /s}}\n", "cfg.yaml:3: ", "only to type: memory");
}

TEST(Config, HardeningSettings) {
  const std::string pol = "policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\n";
  auto d = parse_config(pol, "cfg.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->limits.max_connections_per_client, 0u);
  EXPECT_EQ(d->limits.first_byte_timeout, Micros{5'000'000});
  EXPECT_FALSE(d->admin_listen.has_value());
  EXPECT_FALSE(d->peek_requires_admin_token);
  EXPECT_EQ(d->store.max_bytes, size_t{256} << 20);
  auto c = parse_config(pol + "admin_listen: 127.0.0.1:9091\nadmin_token: 0123456789abcdef\npeek_requires_admin_token: true\n"
                              "limits: {max_connections_per_client: 50, first_byte_timeout: 2s}\n"
                              "store: {type: memory, max_bytes: 67108864}\n",
                        "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->admin_listen->port, 9091);
  EXPECT_TRUE(c->peek_requires_admin_token);
  EXPECT_EQ(c->limits.max_connections_per_client, 50u);
  EXPECT_EQ(c->limits.first_byte_timeout, Micros{2'000'000});
  EXPECT_EQ(c->store.max_bytes, size_t{64} << 20);
  expect_error(pol + "peek_requires_admin_token: true\n", "cfg.yaml:3: ", "needs admin_token");
  expect_error(pol + "admin_listen: nowhere\n", "cfg.yaml:3: ", "admin_listen");
  expect_error(pol + "listen: 127.0.0.1:9000\nadmin_listen: 127.0.0.1:9000\n", "cfg.yaml:4: ", "differ from listen");
  expect_error(pol + "limits: {max_connections_per_client: -1}\n", "cfg.yaml:3: ", "max_connections_per_client");
  expect_error(pol + "limits: {first_byte_timeout: 5}\n", "cfg.yaml:3: ", "missing unit");
  expect_error(pol + "store: {type: memory, max_bytes: 1000}\n", "cfg.yaml:3: ", "store.max_bytes");
  expect_error(pol + "store: {type: redis, max_bytes: 67108864}\n", "cfg.yaml:3: ", "only to type: memory");
  // A reload error quotes the bad file's bytes escaped: no terminal escape, no forged line.
  const Status esc = fails(pol + "\"evil\\e[2J\\nfake log line\\x00\": 1\n");
  EXPECT_NE(esc.message().find("evil\\x1b[2J\\x0afake log line\\x00"), std::string::npos) << esc.message();
  for (const char ch : esc.message()) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << esc.message();
  Config next = *c;
  next.admin_listen->port = 9092;
  EXPECT_NE(check_reloadable(*c, next).message().find("admin_listen"), std::string::npos);
}

TEST(Config, AlgorithmParametersMustMatch) {
  expect_error("policies:\n  a: {algorithm: fixed_window, rate: 5, burst: 1}\n", "cfg.yaml:2: ", "'rate' is for bucket");
  expect_error("policies:\n  a: {algorithm: token_bucket, limit: 5, window: 1s}\n", "cfg.yaml:2: ", "'limit' is for window");
  expect_error("policies:\n  a: {algorithm: token_bucket, rate: 5, burst: 1, mode: shape}\n", "cfg.yaml:2: ", "only to leaky_bucket");
  expect_error("policies:\n  a: {algorithm: leaky_bucket, rate: 5, burst: 1, mode: queue}\n", "cfg.yaml:2: ", "police or shape");
  expect_error("policies:\n  a: {algorithm: gcra, rate: 5, burst: 1}\n", "cfg.yaml:2: ", "unknown algorithm 'gcra'");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5}\n", "cfg.yaml:2: ", "needs 'limit' and 'window'");
  expect_error("policies:\n  a: {limit: 5, window: 1s}\n", "cfg.yaml:2: ", "'algorithm' is required");
}

TEST(Config, ConsistencyPerPolicy) {
  auto c = parse_config(
      "store: { type: redis }\n"
      "policies:\n"
      "  e: { algorithm: fixed_window, limit: 100, window: 1s }\n"
      "  l: { algorithm: sliding_window_counter, limit: 100, window: 1s, consistency: lease, lease_max: 7, lease_ttl: 250ms }\n"
      "  a: { algorithm: fixed_window, limit: 100, window: 1s, consistency: async, sync_interval: 20ms }\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->find_policy("e")->policy.consistency().mode, Consistency::kExact);
  const ConsistencyOptions& l = c->find_policy("l")->policy.consistency();
  EXPECT_EQ(l.mode, Consistency::kLease);
  EXPECT_EQ(l.lease_max, 7);
  EXPECT_EQ(l.lease_ttl, Micros{250'000});
  EXPECT_EQ(c->find_policy("a")->policy.consistency().sync_interval, Micros{20'000});
  expect_error("policies:\n  a: {algorithm: token_bucket, rate: 5, burst: 10, consistency: lease}\n", "cfg.yaml:2: ",
               "fixed_window and sliding_window_counter only");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s, consistency: eventual}\n", "cfg.yaml:2: ",
               "expected exact, lease or async");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s, consistency: lease, lease_max: 6}\n",
               "cfg.yaml:2: ", "lease_max");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s, consistency: async, count_denied: true}\n",
               "cfg.yaml:2: ", "cannot count denied attempts");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s, sync_interval: 0ms}\n", "cfg.yaml:2: ",
               "sync_interval");
}

// `region` + `regions` (config_regions.h): the own region's Redis becomes store.url, window
// policies are global by default, the rest must say scope: region; every mistake is refused
// with its line and nothing is applied.
TEST(Config, Regions) {
  const std::string regions =
      "region: eu\n"
      "regions:\n"
      "  sync_interval: 250ms\n"
      "  partition_share: true\n"
      "  stores:\n"
      "    eu: { redis: \"redis://10.0.0.5:6379/0\" }\n"
      "    us: { redis: \"redis://10.1.0.5:6379/0\" }\n";
  auto c = parse_config(regions +
                            "store: { type: redis, on_failure: closed }\n"
                            "policies:\n"
                            "  g: { algorithm: fixed_window, limit: 10, window: 1s }\n"
                            "  s: { algorithm: sliding_window_counter, limit: 10, window: 1s, scope: global }\n"
                            "  b: { algorithm: token_bucket, rate: 1, burst: 5, scope: region }\n"
                            "  a: { algorithm: fixed_window, limit: 10, window: 1s, consistency: async, scope: region }\n",
                        "r.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->regions.has_value());
  EXPECT_EQ(c->regions->self, "eu");
  EXPECT_EQ(c->regions->sync_interval, Micros{250'000});
  EXPECT_TRUE(c->regions->partition_share);
  ASSERT_EQ(c->regions->stores.size(), 2u);
  EXPECT_EQ(c->store.type, StoreType::kRedis);
  EXPECT_EQ(c->store.url, "redis://10.0.0.5:6379/0");
  EXPECT_EQ(c->store.on_failure, FailurePolicy::kClosed);
  EXPECT_TRUE(c->find_policy("g")->policy.consistency().across_regions);
  EXPECT_TRUE(c->find_policy("s")->policy.consistency().across_regions);
  EXPECT_FALSE(c->find_policy("b")->policy.consistency().across_regions);
  EXPECT_FALSE(c->find_policy("a")->policy.consistency().across_regions);
  // Without regions nothing is global.
  auto plain = parse_config("policies: {g: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "p.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->regions.has_value());
  EXPECT_FALSE(plain->find_policy("g")->policy.consistency().across_regions);

  const std::string pol = "policies: {g: {algorithm: fixed_window, limit: 10, window: 1s}}\n";
  const std::string two = "  stores:\n    eu: { redis: \"redis://a:1\" }\n    us: { redis: \"redis://b:1\" }\n";
  expect_error("region: mars\nregions:\n" + two + pol, "cfg.yaml:1: ", "region 'mars' is not one of regions.stores (eu, us)");
  expect_error("regions:\n" + two + pol, "cfg.yaml:2: ", "set 'region'");
  expect_error("region: eu\n" + pol, "cfg.yaml:1: ", "'regions', which is missing");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\" }\n    eu: { redis: \"redis://b:1\" }\n" + pol,
               "cfg.yaml:5: ", "region 'eu' given twice");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\" }\n    us: {}\n" + pol,
               "cfg.yaml:5: ", "'redis' is required");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\" }\n    us: { redis: \"http://b\" }\n" + pol,
               "cfg.yaml:5: ", "regions.stores.us.redis");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\" }\n" + pol, "cfg.yaml:4: ", "at least two regions");
  expect_error("region: eu\nregions:\n  sync_interval: 0ms\n" + two + pol, "cfg.yaml:3: ", "regions.sync_interval: invalid duration '0ms': must be positive");
  expect_error("region: eu\nregions:\n  sync_interval: -1s\n" + two + pol, "cfg.yaml:3: ", "regions.sync_interval");
  expect_error("region: eu\nregions:\n  sync_interval: 2m\n" + two + pol, "cfg.yaml:3: ", "between 1ms and 1m");
  expect_error("region: eu\nregions:\n  partition_share: 1\n" + two + pol, "cfg.yaml:3: ", "true or false");
  expect_error("region: eu\nregions:\n  sync: 1s\n" + two + pol, "cfg.yaml:3: ", "unknown key 'sync'");
  expect_error("region: eu\nregions: {sync_interval: 1s}\n" + pol, "cfg.yaml:2: ", "'stores' is required");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\", share: 0.7 }\n    us: { redis: \"redis://b:1\", share: 0.6 }\n" + pol,
               "cfg.yaml:4: ", "add up to");
  expect_error("region: eu\nregions:\n  stores:\n    eu: { redis: \"redis://a:1\", share: 0.5 }\n    us: { redis: \"redis://b:1\" }\n" + pol,
               "cfg.yaml:4: ", "every region or to none");
  expect_error("region: eu\nregions:\n  stores:\n    EU!: { redis: \"redis://a:1\" }\n    us: { redis: \"redis://b:1\" }\n" + pol,
               "cfg.yaml:4: ", "a-z, 0-9");
  expect_error("region: eu\nregions:\n" + two + "store: { type: redis, url: \"redis://c:1\" }\n" + pol, "cfg.yaml:6: ",
               "regions.stores.eu.redis (give it once)");
  expect_error("region: eu\nregions:\n" + two + "store: { type: memory }\n" + pol, "cfg.yaml:6: ", "must be redis");
  expect_error("region: eu\nregions:\n" + two + "store: { type: redis, denial_cache: {} }\n" + pol, "cfg.yaml:6: ",
               "not combined with regions");
  expect_error("region: eu\nregions:\n" + two + "policies: {b: {algorithm: token_bucket, rate: 1, burst: 5}}\n",
               "cfg.yaml:6: ", "fixed_window and sliding_window_counter only, not token_bucket");
  expect_error("region: eu\nregions:\n" + two + "policies: {l: {algorithm: sliding_window_log, limit: 5, window: 1s}}\n",
               "cfg.yaml:6: ", "use scope: region");
  expect_error("region: eu\nregions:\n" + two + "policies: {a: {algorithm: fixed_window, limit: 5, window: 1s, consistency: lease}}\n",
               "cfg.yaml:6: ", "scope global needs consistency exact");
  expect_error("region: eu\nregions:\n" + two + "policies: {a: {algorithm: fixed_window, limit: 5, window: 1s, count_denied: true, scope: global}}\n",
               "cfg.yaml:6: ", "cannot count denied attempts");
  expect_error("region: eu\nregions:\n" + two + "policies: {a: {algorithm: fixed_window, limit: 5, window: 1s, scope: planet}}\n",
               "cfg.yaml:6: ", "global (counted across regions) or region");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 5, window: 1s, scope: global}}\n", "cfg.yaml:1: ",
               "applies only with 'regions'");
  // --store cannot replace the regions' stores; a reload cannot change them.
  Overrides o;
  o.store = "redis://127.0.0.1:6380";
  EXPECT_FALSE(apply_overrides(*c, o).is_ok());
  auto other = parse_config(regions + "policies: {g: {algorithm: fixed_window, limit: 10, window: 1s}}\n", "r.yaml");
  ASSERT_TRUE(other.ok());
  Config moved = *other;
  moved.regions->self = "us";
  EXPECT_NE(check_reloadable(*other, moved).message().find("regions"), std::string::npos);
}

TEST(Config, RedisClusterUrl) {
  auto c = parse_config("store:\n  type: redis\n  url: redis-cluster://10.0.0.1:7000,10.0.0.2:7000\n"
                        "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n",
                        "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->store.type, StoreType::kRedis);
  EXPECT_EQ(c->store.url, "redis-cluster://10.0.0.1:7000,10.0.0.2:7000");
}

TEST(Config, StructuralErrors) {
  expect_error("", "cfg.yaml:1: ", "empty");
  expect_error("listen: 127.0.0.1:80\n", "cfg.yaml:1: ", "'policies' is required");
  expect_error("policies: {}\n", "cfg.yaml:1: ", "at least one");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s}\n  a: {algorithm: fixed_window, limit: 6, window: 1s}\n",
               "cfg.yaml:3: ", "defined twice");
  expect_error("policies:\n  \"bad name!\": {algorithm: fixed_window, limit: 5, window: 1s}\n", "cfg.yaml:2: ", "name");
  expect_error("policies:\n  a: {algorithm: fixed_window, limit: 5, window: 1s\n", "cfg.yaml:", "YAML syntax");
  expect_error("- just\n- a list\n", "cfg.yaml:1: ", "must be a mapping");
  expect_error("store: {type: dynamo}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "memory or redis");
  expect_error("store: {type: memory, url: redis://x:1}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "only to type: redis");
  expect_error("store: {type: redis, url: http://x:1}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "redis://");
  expect_error("store: {type: redis, url: \"redis-cluster://h:1,h:2/2\"}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "only database 0");
  expect_error("store: {type: redis, on_failure: maybe}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "open or closed");
  expect_error("store: {type: redis, pool: 2, connections: 2}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml:1: ", "not both");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\nforward_auth: {key_header: \"X User\"}\n", "cfg.yaml:2: ", "header name");
}

// A key naming one of a fixed set (config_parser.h's one_of) is refused with its choices and the
// value given, in one form for every such key.
TEST(Config, AKeyOfAFixedSetNamesItsChoicesAndTheValueGiven) {
  const std::string p = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n";
  EXPECT_EQ(fails("store: {type: dynamo}\n" + p).message(), "cfg.yaml:1: store.type must be memory or redis, got 'dynamo'");
  EXPECT_EQ(fails("store: {type: [memory]}\n" + p).message(), "cfg.yaml:1: store.type must be a string");
  EXPECT_EQ(fails("store: {type: redis, key_layout: flat}\n" + p).message(),
            "cfg.yaml:1: store.key_layout must be native or envoy, got 'flat'");
  EXPECT_EQ(fails("store: {type: redis, on_failure: maybe}\n" + p).message(),
            "cfg.yaml:1: store.on_failure must be open or closed, got 'maybe'");
  EXPECT_EQ(fails("policies:\n  a: {algorithm: leaky_bucket, rate: 5, burst: 1, mode: queue}\n").message(),
            "cfg.yaml:2: policy 'a'.mode must be police or shape, got 'queue'");
  EXPECT_EQ(fails(p + "forward_auth: {client_header: x-real-ip}\n").message(),
            "cfg.yaml:2: forward_auth.client_header must be x-forwarded-for or forwarded, got 'x-real-ip'");
}

TEST(Config, ForwardAuthClientIdentityAndDenyStatus) {
  auto c = parse_config("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n"
                        "forward_auth: {deny_status: 403, trusted_proxies: [127.0.0.1/32, \"::1\", fd00::/8], client_header: forwarded}\n",
                        "cfg.yaml");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->forward_auth_deny_status, 403u);
  EXPECT_EQ(c->client_header, ClientHeader::kForwarded);
  IpAddress a;
  ASSERT_TRUE(IpAddress::parse("fd12::3", a));
  EXPECT_TRUE(c->trusted_proxies.contains(a));
  // Defaults: 429, nobody trusted.
  auto d = parse_config("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "cfg.yaml");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->forward_auth_deny_status, 429u);
  EXPECT_TRUE(d->trusted_proxies.empty());
  const std::string base = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n";
  expect_error(base + "forward_auth: {deny_status: 500}\n", "cfg.yaml:2: ", "forward_auth.deny_status");
  expect_error(base + "forward_auth: {deny_status: 404}\n", "cfg.yaml:2: ", "must be 429, 403 or 401");
  expect_error(base + "forward_auth:\n  trusted_proxies:\n    - 10.0.0.0/8\n    - 10.0.0.0/33\n", "cfg.yaml:5: ", "prefix length is at most 32");
  expect_error(base + "forward_auth: {trusted_proxies: 10.0.0.0/8}\n", "cfg.yaml:2: ", "must be a list");
  expect_error(base + "forward_auth: {client_header: x-real-ip}\n", "cfg.yaml:2: ", "x-forwarded-for or forwarded");
}

TEST(Config, HeaderSetAndProblemJson) {
  const std::string base = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n";
  auto d = parse_config(base, "cfg.yaml");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->render.headers, http::HeaderSet::kIetf);  // the defaults
  EXPECT_FALSE(d->render.problem_json);
  for (auto [text, set] : {std::pair{"ietf", http::HeaderSet::kIetf}, {"draft6", http::HeaderSet::kDraft6},
                           {"x-ratelimit", http::HeaderSet::kXRateLimit}, {"none", http::HeaderSet::kNone}}) {
    auto c = parse_config(base + "headers: " + text + "\nproblem_json: true\n", "cfg.yaml");
    ASSERT_TRUE(c) << c.status().message();
    EXPECT_EQ(c->render.headers, set) << text;
    EXPECT_TRUE(c->render.problem_json);
  }
  expect_error(base + "headers: draft-6\n", "cfg.yaml:2: ", "headers must be ietf, draft6, x-ratelimit or none (got 'draft-6')");
  expect_error(base + "headers: IETF\n", "cfg.yaml:2: ", "headers must be");
  expect_error(base + "headers: [ietf]\n", "cfg.yaml:2: ", "headers");
  expect_error(base + "problem_json: sometimes\n", "cfg.yaml:2: ", "problem_json");
  // Both only shape answers, so a reload may change them.
  auto next = parse_config(base + "headers: none\nproblem_json: true\n", "cfg.yaml");
  ASSERT_TRUE(next);
  EXPECT_TRUE(check_reloadable(*d, *next).is_ok());
}

// Issue 23 item 3: the alias bomb under `domains:` (and anywhere else in the file) is refused
// with its line before anything walks the document.
TEST(Config, AnAliasBombIsRefusedWithItsLine) {
  const std::string yaml = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n"
                           "grpc_listen: 127.0.0.1:0\n"
                           "domains:\n"
                           "  - domain: bomb\n"
                           "    descriptors:\n"
                           "      - key: k\n"
                           "        rate_limit: {unit: second, requests_per_unit: 1}\n"
                           "        metadata:\n" +
                           testing_yaml::alias_bomb_lines(10);
  expect_error(yaml, "cfg.yaml:15: ", "YAML aliases expand the document to more than 1000000 nodes");
}

TEST(Config, DeepNestingIsRefusedBeforeYamlCppRecurses) {
  std::string deep = "policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\nx: ";
  deep += std::string(100000, '[');
  expect_error(deep, "cfg.yaml:2: ", "nesting deeper than 64");
  // Brackets inside quotes and comments do not count.
  auto ok = parse_config("# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"
                         "policies: {\"a[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\": x}\n", "q.yaml");
  EXPECT_EQ(ok.status().message().find("nesting"), std::string::npos) << ok.status().message();
}

TEST(Config, AdminTokenIsCheckedButNeverEchoed) {
  const Status s = fails("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\nadmin_token: hunter2\n");
  EXPECT_NE(s.message().find("at least 16"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("hunter2"), std::string::npos) << s.message();
  const Status sp = fails("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\nadmin_token: \"abc def ghi jkl mno\"\n");
  EXPECT_EQ(sp.message().find("abc def"), std::string::npos) << sp.message();
}

TEST(Config, MissingFileIsReported) {
  auto c = load_config("/nonexistent/ratelimit.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/ratelimit.yaml: cannot open"), std::string::npos);
}

TEST(Config, DirectoryAndEndlessFilesAreRefused) {
  auto dir = load_config(std::string(RATELIMIT_SOURCE_DIR) + "/examples");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos) << dir.status().message();
  // /dev/zero never ends: the loader must stop at its 1 MiB bound instead of reading forever.
  auto endless = load_config("/dev/zero");
  ASSERT_FALSE(endless.ok());
  EXPECT_NE(endless.status().message().find("larger than 1 MiB"), std::string::npos)
      << endless.status().message();
}

TEST(Overrides, ReplaceTheFileValues) {
  auto c = parse_config("listen: 127.0.0.1:1\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "c.yaml");
  ASSERT_TRUE(c.ok());
  Overrides o;
  o.listen = "0.0.0.0:9999";
  o.store = "redis://127.0.0.1:7000/1";
  o.threads = 4;
  ASSERT_TRUE(apply_overrides(*c, o).is_ok());
  EXPECT_EQ(c->listen.host, "0.0.0.0");
  EXPECT_EQ(c->listen.port, 9999);
  EXPECT_EQ(c->store.type, StoreType::kRedis);
  EXPECT_EQ(c->store.url, "redis://127.0.0.1:7000/1");
  EXPECT_EQ(c->threads, 4u);
  o = Overrides{};
  o.store = "memory";
  ASSERT_TRUE(apply_overrides(*c, o).is_ok());
  EXPECT_EQ(c->store.type, StoreType::kMemory);

  Overrides bad;
  bad.listen = "nowhere";
  EXPECT_NE(apply_overrides(*c, bad).message().find("--listen"), std::string::npos);
  Overrides bad_store;
  bad_store.store = "mysql://x";
  EXPECT_NE(apply_overrides(*c, bad_store).message().find("--store"), std::string::npos);
}

TEST(ParseListen, Forms) {
  EXPECT_EQ(parse_listen("localhost:80")->host, "127.0.0.1");
  EXPECT_EQ(parse_listen("[::1]:0")->port, 0);
  EXPECT_FALSE(parse_listen("127.0.0.1:65536").ok());
  EXPECT_FALSE(parse_listen("127.0.0.1:").ok());
  EXPECT_FALSE(parse_listen("[::1:80").ok());
  EXPECT_FALSE(parse_listen(":80").ok());
}

TEST(Reload, OnlyPoliciesAndLimitsMayChange) {
  auto a = parse_config("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "a.yaml");
  auto b = parse_config("policies: {b: {algorithm: token_bucket, rate: 1, burst: 1}}\nlimits: {max_cost: 5}\nadmin_token: 0123456789abcdefXYZ\n", "b.yaml");
  auto c = parse_config("listen: 127.0.0.1:1234\nstore: {type: memory, max_keys: 5}\npolicies: {a: {algorithm: fixed_window, limit: 1, window: 1s}}\n", "c.yaml");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(check_reloadable(*a, *b).is_ok());
  const Status s = check_reloadable(*a, *c);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("listen"), std::string::npos);
  EXPECT_NE(s.message().find("store"), std::string::npos);
}


TEST(Config, RequestLimitBoundsAPerRequestLimit) {
  auto c = parse_config("policies:\n"
                        "  plan: { algorithm: sliding_window_counter, limit: 100, window: 1m, request_limit: { min: 10, max: 5000 } }\n"
                        "  bucket: { algorithm: token_bucket, rate: 10, burst: 20, request_limit: { max: 200 } }\n"
                        "  fixed: { algorithm: fixed_window, limit: 5, window: 1s }\n",
                        "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const auto& plan = c->policies.at("plan");
  EXPECT_EQ(plan.request_limit_min, 10);
  EXPECT_EQ(plan.request_limit_max, 5000);
  EXPECT_EQ(c->policies.at("bucket").request_limit_min, 1);  // min defaults to 1
  EXPECT_EQ(c->policies.at("bucket").request_limit_max, 200);
  EXPECT_EQ(c->policies.at("fixed").request_limit_max, 0);  // absent: no per-request limit
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, request_limit: {min: 5}}}\n",
               "cfg.yaml:1:", "'max' is required");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, request_limit: {min: 9, max: 5}}}\n",
               "cfg.yaml:1:", "min (9) is above max (5)");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, request_limit: {max: 5, step: 1}}}\n",
               "cfg.yaml:1:", "unknown key 'step'");
  // The bounds must make valid policies: a sliding log holds at most 100,000 entries.
  expect_error("policies: {a: {algorithm: sliding_window_log, limit: 1, window: 1s, request_limit: {max: 200000}}}\n",
               "cfg.yaml:1:", "a limit of 200000 is not valid for this policy");
  // Lease and async decide locally on slices of one limit: not combined with a per-request one.
  expect_error("policies: {a: {algorithm: fixed_window, limit: 10, window: 1s, consistency: lease, request_limit: {max: 50}}}\n",
               "cfg.yaml:1:", "request_limit needs consistency: exact (the policy's is lease)");
}

}  // namespace
}  // namespace ratelimit::server

namespace ratelimit::server {
namespace {

TEST(Config, ConcurrencyPoliciesTakeLimitAndLeaseTtl) {
  auto c = parse_config("policies:\n  db: { algorithm: concurrency, limit: 10, lease_ttl: 30s }\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const PolicyConfig* db = c->find_policy("db");
  ASSERT_NE(db, nullptr);
  const Policy& p = db->policy;
  EXPECT_TRUE(p.is_concurrency());
  EXPECT_EQ(p.limit(), 10);
  EXPECT_EQ(p.lease_ttl(), Micros{30'000'000});
  expect_error("policies:\n  db: { algorithm: concurrency, limit: 10 }\n", "cfg.yaml:2:", "lease_ttl");
  expect_error("policies:\n  db: { algorithm: concurrency, limit: 10, lease_ttl: 30s, window: 1s }\n",
               "cfg.yaml:2:", "'window' does not apply to concurrency");
  expect_error("policies:\n  db: { algorithm: concurrency, limit: 100001, lease_ttl: 30s }\n", "cfg.yaml:2:",
               "limit");
  expect_error("policies:\n  db: { algorithm: concurrency, limit: 1, lease_ttl: 2d }\n", "cfg.yaml:2:",
               "lease_ttl");
  expect_error("policies:\n  db: { algorithm: concurrency, limit: 1, lease_ttl: 1s, consistency: lease }\n",
               "cfg.yaml:2:", "'consistency' does not apply to concurrency");
}

}  // namespace
}  // namespace ratelimit::server

namespace ratelimit::server {
namespace {

TEST(Config, WaitingKeysAreReadAndValidated) {
  auto c = parse_config("policies:\n"
                        "  db: { algorithm: concurrency, limit: 10, lease_ttl: 30s, max_wait: 2s, max_queue: 100 }\n"
                        "  api: { algorithm: token_bucket, rate: 5, burst: 10, max_wait: 500ms, max_queue: 1 }\n"
                        "  smooth: { algorithm: leaky_bucket, rate: 5, burst: 10, mode: shape, hold_delay: true }\n"
                        "  plain: { algorithm: fixed_window, limit: 5, window: 1s }\n",
                        "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->policies.at("db").max_wait, Micros{2'000'000});
  EXPECT_EQ(c->policies.at("db").max_queue, 100);
  EXPECT_EQ(c->policies.at("api").max_wait, Micros{500'000});
  EXPECT_TRUE(c->policies.at("smooth").hold_delay);
  EXPECT_EQ(c->policies.at("plain").max_wait, Micros{0});  // absent: never waits
  EXPECT_EQ(c->policies.at("plain").max_queue, 0);
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, max_wait: 1s}}\n", "cfg.yaml:1:",
               "max_wait and max_queue go together");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, max_queue: 3}}\n", "cfg.yaml:1:",
               "max_wait and max_queue go together");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, max_wait: 11m, max_queue: 3}}\n",
               "cfg.yaml:1:", "max_wait must be at most 10m");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, max_wait: 1s, max_queue: 0}}\n",
               "cfg.yaml:1:", "max_queue");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 1, window: 1s, max_wait: 1s, max_queue: 100001}}\n",
               "cfg.yaml:1:", "max_queue");
  expect_error("policies: {a: {algorithm: fixed_window, limit: 10, window: 1s, consistency: async, max_wait: 1s, max_queue: 5}}\n",
               "cfg.yaml:1:", "max_wait needs consistency: exact");
  expect_error("policies: {a: {algorithm: leaky_bucket, rate: 1, burst: 2, hold_delay: true}}\n", "cfg.yaml:1:",
               "hold_delay applies to leaky_bucket with mode: shape");
  expect_error("policies: {a: {algorithm: token_bucket, rate: 1, burst: 2, hold_delay: yes}}\n", "cfg.yaml:1:",
               "hold_delay must be true or false");
}

TEST(Config, PriorityClassesAreReadAndValidated) {
  const std::string head = "store: { type: memory }\npolicies:\n  db:\n    algorithm: concurrency\n    limit: 10\n"
                           "    lease_ttl: 30s\n";
  auto c = parse_config(head + "    classes: default\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto& d = c->find_policy("db")->classes;
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "critical");
  EXPECT_EQ(d[2].name, "sheddable");
  EXPECT_EQ(d[2].headroom, 0.5);
  c = parse_config(head + "    classes:\n      - { name: gold, weight: 5 }\n      - { name: bronze, headroom: 0.3 }\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->find_policy("db")->classes[0].weight, 5);
  EXPECT_EQ(c->find_policy("db")->classes[1].weight, 1);
  expect_error(head + "    classes:\n      - { name: a }\n      - { name: a }\n", "cfg.yaml:9:", "listed twice");
  expect_error(head + "    classes:\n      - { name: Big }\n", "cfg.yaml:8:", "a-z, 0-9");
  expect_error(head + "    classes:\n      - { name: a, weight: 0 }\n", "cfg.yaml:8:", "weight");
  expect_error(head + "    classes:\n      - { name: a, headroom: 1 }\n", "cfg.yaml:8:", "[0, 1)");
  expect_error(head + "    classes:\n      - { name: a, headroom: 0.5 }\n      - { name: b, headroom: 0.2 }\n",
               "cfg.yaml:9:", "lowest classes first");
  expect_error(head + "    classes:\n      - { name: a, headroom: 0.95 }\n", "cfg.yaml:8:", "no unit of limit 10");
  expect_error(head + "    classes:\n      - { name: a, colour: red }\n", "cfg.yaml:8:", "colour");
  expect_error(head + "    classes: []\n", "cfg.yaml:7:", "'default' or a list");
  // A rate policy takes classes (headroom on its counter) with exact counting only.
  expect_error("store: { type: redis, url: \"redis://127.0.0.1:1\" }\npolicies:\n  r: { algorithm: fixed_window, limit: 5, "
               "window: 1s, consistency: async, classes: default }\n",
               "cfg.yaml:3:", "need consistency: exact");
  expect_error("store: { type: memory }\npolicies:\n  a: { algorithm: concurrency, limit: adaptive, max_limit: 50, "
               "lease_ttl: 10s, classes: default }\n", "cfg.yaml:3:", "fixed limit");
}

}  // namespace
}  // namespace ratelimit::server
