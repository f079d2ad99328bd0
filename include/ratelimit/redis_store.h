// redis_store.h — the shared store: limit state in Redis or Valkey, every decision one atomic
// Lua call, so several processes (ratelimitd instances, services) share one exact count.
//
//   ratelimit::RedisStoreOptions opts;
//   opts.url = "redis://127.0.0.1:6379/0";
//   opts.on_failure = ratelimit::FailurePolicy::kOpen;
//   auto store = ratelimit::RedisStore::connect(opts);       // Result<std::shared_ptr<...>>
//   if (!store.ok()) { /* bad URL, Redis unreachable, AUTH refused: store.status() says */ }
//   ratelimit::Limiter limiter(policy, *store);
//
// How it works (details in src/redis/redis_store.cc): Lua code per algorithm mirrors the core
// function (src/core/<algorithm>.cc) step by step. It is loaded when a connection opens, as a
// Redis Functions library (FUNCTION LOAD REPLACE; called with FCALL) and as scripts (SCRIPT
// LOAD; called with EVALSHA where the server has no functions); a flushed server (NOSCRIPT,
// "Function not found") is reloaded and the call retried, invisibly. Time is the Redis
// server's TIME, so application clocks never skew a count. Requests in flight are pipelined
// over a small pool of connections driven by the store's own I/O thread(s), and decisions that
// queue behind busy connections are batched into one call (options.max_batch).
//
// Keys: `<key_prefix>{<escaped user key>}:<policy name>` (plus `#log` for the sliding log's
// sorted set). The user key is escaped so it can never contain a brace: all keys of one user
// key share one hash tag (acquire_all is single-slot, cluster-safe), and no user key can reach
// another one's state. Every write sets a TTL no longer than the state needs (rounded up to the
// millisecond), so idle keys disappear by themselves.
//
// Failure policy: on a timeout, a refused or broken connection, or an error reply, a decision
// is answered by options.on_failure — fail open (allowed, reason kStoreFailedOpen) or closed
// (denied, kStoreFailedClosed) — and counted (counters()). No exception reaches the caller; the
// store reconnects with backoff and recovers without a restart when Redis comes back.
//
// Thread-safety: every method may be called from any thread, concurrently. Completions run on
// the store's I/O thread (or inline, on the caller's thread, when no connection is usable or
// the input is invalid); they must be quick and must not block on this store (the blocking
// forms, e.g. acquire(), must not be called from inside a completion). Do not drop the last
// reference to the store from inside one of its completions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/failure_policy.h"
#include "ratelimit/shared_counts.h"
#include "ratelimit/shared_fields.h"
#include "ratelimit/store.h"

namespace ratelimit {

// TLS settings for rediss:// and rediss-cluster:// URLs (ignored by the plain forms). Files are
// PEM and are read once, by RedisStore::connect: a missing or unusable file is kInvalidArgument
// naming it. Config file: store: { tls: { ca_file, cert_file, key_file, server_name, verify } }.
struct RedisTlsOptions {
  // The CA certificate(s) that signed the server's certificate. Empty: the system's trust
  // store (/etc/ssl/certs), which is right for managed services with public certificates.
  std::string ca_file;
  // A client certificate and its private key, for servers that require one (Redis'
  // tls-auth-clients yes). Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry (DNS or IP SAN). Empty: the URL's host (for
  // a cluster, each node's announced address). Also sent as SNI when it is a name.
  std::string server_name;
  // Verify the certificate chain and the name. Default on; turning it off makes the link
  // encrypted but unauthenticated (anyone in the path can impersonate the server) — for tests
  // against throwaway self-signed servers only.
  bool verify = true;

  friend bool operator==(const RedisTlsOptions&, const RedisTlsOptions&) = default;
};

// Everything configurable, with defaults. A config file maps onto these one to one:
//   store: { type: redis, url: ..., connections: 4, connect_timeout: 1s,
//            command_timeout: 250ms, on_failure: open, key_prefix: "rl:" }
// Where the counters of Policy::fixed_window_every_hit policies (envoyproxy/ratelimit's
// counter) live in Redis. Every other policy always uses the native layout.
enum class RedisKeyLayout : uint8_t {
  // key_prefix + "{" + key + "}:" + policy name: one hash per key, decided by the Lua library.
  kNative,
  // envoyproxy/ratelimit's own: key + the window's start in Unix seconds (this host's clock),
  // a plain integer, INCRBY hits then EXPIRE <window seconds>; no key_prefix. Instances of
  // envoyproxy/ratelimit and ratelimitd then share one count per descriptor and window, so a
  // fleet can migrate one instance at a time (src/redis/envoy_counter.h). Calls that decide
  // several keys all or nothing (acquire_all, kAllOrNothing) keep the native layout.
  kEnvoy,
};

struct RedisStoreOptions {
  // `redis://[user:password@]host:port[/db]` (host may be a name, an IPv4 address or a
  // bracketed IPv6 address; port defaults to 6379, db to 0) or `unix:///path/to/socket`
  // (optionally `unix://[user:password@]/path?db=N`). `user:` may be empty (`:password@`:
  // password-only AUTH). Percent-escapes (%40 for '@') are decoded in user and password.
  //
  // `redis-cluster://[user:password@]host:port[,host:port...]` is a Redis Cluster: any one of
  // the seeds (masters or replicas) is enough to discover the others (CLUSTER SHARDS, or
  // CLUSTER SLOTS before Redis 7). Each call goes to the master serving its key's slot, so all
  // keys of one user key (one hash tag) stay on one node; MOVED and ASK redirections, TRYAGAIN
  // and CLUSTERDOWN are handled inside the store (bounded retries within command_timeout,
  // then the failure policy); a replica promoted by a failover is found by the topology
  // refresh that follows the errors, without a restart. Never reads from replicas. A cluster
  // has only database 0: any other db is kInvalidArgument.
  //
  // `rediss://...` and `rediss-cluster://...` are the same over TLS (see `tls`).
  //
  // `redis-sentinel://[user:password@]host:port[,host:port...]/master-name[/db]` is a Redis
  // Sentinel deployment: the hosts are sentinels (port default 26379), asked in turn for the
  // master named `master-name`; credentials and db are the master's. Decisions follow a
  // failover (+switch-master) without a restart; while it runs they answer by the failure
  // policy. The sentinels' own AUTH, if any, is sentinel_user / sentinel_password.
  std::string url = "redis://127.0.0.1:6379/0";

  // Redis Sentinel only: AUTH for the sentinels (their requirepass or ACL user), which the
  // URL cannot carry beside the master's. Empty password: no AUTH to the sentinels.
  std::string sentinel_user;
  std::string sentinel_password;

  // Connections in the pool (per master in a cluster); requests are spread over them round
  // robin and pipelined on each. 0 (default) = 2 per hardware thread
  // (std::thread::hardware_concurrency), at most 16.
  size_t connections = 0;

  // I/O threads driving the connections (each connection belongs to one). Default 1: one
  // thread keeps a Redis server busy; raise it only if the client becomes the bottleneck.
  size_t io_threads = 1;

  // Bound on opening a connection (TCP connect + AUTH + SELECT + SCRIPT LOAD). Default 1 s.
  std::chrono::milliseconds connect_timeout{1000};

  // Bound on one command: a call not answered within it completes with the failure policy,
  // and its connection (whose later replies are queued behind the late one) is closed and
  // reopened. Default 250 ms. Resolution: about a quarter of the value (at least 1 ms).
  std::chrono::milliseconds command_timeout{250};

  // Backoff between reconnection attempts: starts at the first value, doubles per failure,
  // capped at the second; reset by a successful connection.
  std::chrono::milliseconds reconnect_backoff_min{20};
  std::chrono::milliseconds reconnect_backoff_max{2000};

  // Redis Cluster only: how often the slot map is re-read when nothing went wrong (it is
  // also re-read at once after a MOVED, a CLUSTERDOWN or a lost connection). Default 5 s.
  std::chrono::milliseconds topology_refresh_interval{5000};

  // What decisions answer while Redis cannot: kOpen admits, kClosed denies. Default kOpen
  // (a rate limiter that is down should not take the API down with it).
  FailurePolicy on_failure = FailurePolicy::kOpen;

  // Prepended to every Redis key; lets several deployments share one Redis. At most 128
  // bytes, and without '{' or '}' (they would change the hash tag). Default "rl:".
  std::string key_prefix = "rl:";

  // Where every-hit counters live (see RedisKeyLayout). Default kNative.
  RedisKeyLayout key_layout = RedisKeyLayout::kNative;

  // connect() waits for the first connection and fails (kUnavailable, kDeadlineExceeded,
  // or kInvalidArgument for refused credentials) when it cannot be made, so a wrong URL is
  // reported at start-up. With lazy_connect = true it returns at once and decisions answer by
  // the failure policy until Redis is reachable.
  bool lazy_connect = false;

  // Redis Functions: load the library (FUNCTION LOAD REPLACE, on every connection) and decide
  // with FCALL, which runs none of a script's per-call setup. Servers without functions (Redis
  // < 7, FUNCTION renamed or forbidden) are detected at connect and answered with EVALSHA of
  // the same code. false: EVALSHA only. Default true.
  bool use_functions = true;

  // Decisions per Redis call, 1 ... 1024. Decisions that queue while every connection's call
  // is in flight go out together as one call (each decision still atomic and in order; one
  // clock read for the call); a decision that finds a connection free is sent at once — there
  // is no timer. In a cluster, a batch holds one slot's decisions. 1: one call per decision.
  // Default 64.
  size_t max_batch = 64;

  // TLS for rediss:// and rediss-cluster:// (see RedisTlsOptions; defaults: system CAs,
  // verification on).
  RedisTlsOptions tls;

  // Eviction safety. A Redis whose maxmemory-policy is not `noeviction` may delete limiter
  // keys under memory pressure, which silently resets counts (a limit of 100 admits more).
  // Every connection reads the policy (INFO memory, which works where CONFIG is disabled)
  // before it is ready; eviction_policy() reports it. With require_noeviction = true a node
  // with any other policy is refused: connect() fails with kInvalidArgument naming the policy,
  // and a connection opened later to such a node never becomes ready (its decisions answer by
  // the failure policy) until the server is fixed.
  bool require_noeviction = false;
  // How often the server's INFO is re-read for evicted_keys growth and a changed policy
  // (one small command per interval, on one connection). Default 10 s; 0 turns polling off.
  std::chrono::milliseconds server_info_interval{10000};

  // TEST MODE ONLY. When set, every script receives this clock's time instead of reading the
  // server's TIME, so the shared test vectors replay deterministically. Never set it in
  // production: instances with skewed clocks would disagree about windows. Not owned; must
  // outlive the store.
  const Clock* test_clock = nullptr;
};

// Monotonic counters since construction, for /metrics. Read with RedisStore::counters().
struct RedisStoreCounters {
  uint64_t commands = 0;        // decisions and resets answered by Redis
  uint64_t errors = 0;          // decisions and resets that failed: timeout, connection, error
  uint64_t timeouts = 0;        // ... of which the command timeout expired
  uint64_t failed_open = 0;     // decisions answered kStoreFailedOpen
  uint64_t failed_closed = 0;   // decisions answered kStoreFailedClosed
  uint64_t connects = 0;        // connections opened successfully (first ones included)
  uint64_t disconnects = 0;     // connections lost or closed because of an error or timeout
  uint64_t script_reloads = 0;  // NOSCRIPT / "Function not found" answers handled by reloading
  uint64_t batches = 0;         // calls that carried several decisions
  uint64_t batched_decisions = 0;  // ... and the decisions they carried
  // Eviction safety (see RedisStoreOptions::require_noeviction):
  uint64_t evicted_keys = 0;    // growth of the servers' INFO evicted_keys since the store saw
                                // each server first (keys Redis deleted for memory: limits lost)
  uint64_t unsafe_policy_connects = 0;  // connection handshakes that found a maxmemory-policy
                                       // other than noeviction
  // Redis Cluster (always 0 on one node):
  uint64_t moved = 0;               // MOVED redirections followed (the slot map was stale)
  uint64_t asked = 0;               // ASK redirections followed (a slot being migrated)
  uint64_t cluster_retries = 0;     // resends after TRYAGAIN, CLUSTERDOWN or no ready master
  uint64_t topology_refreshes = 0;  // slot maps read (CLUSTER SHARDS / CLUSTER SLOTS)
};

// One node of a redis-cluster:// URL, or one sentinel of a redis-sentinel:// URL.
struct RedisSeed {
  std::string host;  // name or address (IPv6 without brackets)
  uint16_t port = 6379;
};

// Parsed form of RedisStoreOptions::url.
struct RedisUrl {
  bool is_unix = false;
  bool is_cluster = false;       // redis-cluster://
  // cluster: every node of the URL (host and port: the first); sentinel: the sentinels, in
  // the URL's order
  std::vector<RedisSeed> seeds;
  std::string host;  // TCP: host name or address (IPv6 without brackets)
  uint16_t port = 6379;
  std::string path;  // unix socket path
  std::string user;  // empty: AUTH with the password only (or no AUTH when both are empty)
  std::string password;
  bool has_password = false;
  int db = 0;  // 0 ... 1'000'000; SELECT is sent when non-zero
  bool tls = false;  // rediss://, rediss-cluster://
  bool is_sentinel = false;      // redis-sentinel://
  std::string master_name;       // sentinel: the name the sentinels monitor the master by
};
// Errors (kInvalidArgument) name the offending part of the URL and never echo the password.
Result<RedisUrl> parse_redis_url(std::string_view url);

// A subscription to the leases released through a Redis (RedisStore::watch_releases).
class ReleaseFeed {
 public:
  // Unsubscribes and closes the connection: no callback runs once it has returned. Never from
  // inside one of the feed's callbacks.
  virtual ~ReleaseFeed() = default;
  // True while the subscription is confirmed and its connection open.
  virtual bool subscribed() const = 0;
  // Subscriptions confirmed so far (each reconnection adds one).
  virtual uint64_t subscriptions() const = 0;
};

// A lease of `policy` on `key` released through the store (by any process, any client of the
// function library); `lease` its id. The views are valid during the call only.
using ReleaseWatcher =
    std::function<void(std::string_view policy, std::string_view key, const LeaseId& lease)>;

class RedisStore final : public Store, public SharedCounts, public SharedFields {
 public:
  // Validates `options` (kInvalidArgument naming the field), starts the I/O thread(s) and the
  // connections; unless options.lazy_connect, waits up to connect_timeout for the first
  // connection and returns its error if none could be made.
  static Result<std::shared_ptr<RedisStore>> connect(RedisStoreOptions options);

  // Closes the connections; calls still pending complete with the failure policy first.
  ~RedisStore() override;

  // The door (store.h). Invalid key, cost or op list: the completion receives the error
  // (kInvalidArgument), inline. Redis unavailable: a Decision by the failure policy.
  // kIndependent: one script call per op, pipelined. kAllOrNothing: one script over every key
  // (decide_many.lua), atomic on one server; in a cluster every key must hash to one slot (one
  // user key: its keys share a hash tag), else kInvalidArgument before anything is sent.
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;
  // Deletes the key's state. Redis unavailable: kUnavailable or kDeadlineExceeded (there is no
  // decision to apply a failure policy to).
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;

  // SharedCounts (shared_counts.h): one FCALL/EVALSHA of distributed.lua each, not batched,
  // counted in commands / errors like decisions. Redis failing: kUnavailable or
  // kDeadlineExceeded (no failure policy: the caller applies its own).
  void reserve_async(const Policy& policy, std::string_view key, int64_t give_back_window_us,
                     int64_t give_back, int64_t want, SharedViewCallback done) override;
  void add_hits_async(const Policy& policy, std::string_view key, int64_t window_us,
                      int64_t hits, SharedViewCallback done) override;

  // SharedFields (shared_fields.h): one EVAL (Redis' TIME stamps the field) on the hash
  // `<prefix>{<escaped key>}:fields`, counted in commands / errors. key: validate_key's bounds;
  // field: 1 ... 256 bytes.
  void exchange_field_async(std::string_view key, std::string_view field, std::string_view value,
                            int64_t ttl_ms, SharedFieldsCallback done) override;

  // Snapshot of the counters (each read atomically; the set is not one instant).
  RedisStoreCounters counters() const;
  // Connections currently open and ready (scripts loaded).
  size_t ready_connections() const;
  // True when decisions go out as FCALL (the function library is loaded and no server refused
  // it); false while connecting, with use_functions = false, or on a server without functions.
  bool uses_functions() const;
  // The options the store was built with (connections resolved to the actual pool size).
  const RedisStoreOptions& options() const;
  // The most recent failure of any connection (OK when none has failed since it was last
  // ready): for health checks and logs. Never contains the password.
  Status last_error() const;
  // OK when a decision for any key can reach Redis now; otherwise why not (kUnavailable, or the
  // connections' last error). One server: a connection is ready. A cluster: every slot is
  // served by a master with a ready connection and no CLUSTERDOWN came in the last second — so
  // a killed master, a failover window and cluster_state:fail all show (readiness, the outage
  // log). Thread-safe.
  Status serving() const;
  // The maxmemory-policy of the server(s), as INFO reports it ("noeviction", "allkeys-lru",
  // ...): the most recent one that is not noeviction if any node has one, else "noeviction";
  // empty until a connection has read it.
  std::string eviction_policy() const;

  // Every release that frees a lease (concurrency.lua publishes it on channel
  // `ratelimit:released`, in the same atomic call) reaches `on_release` on one subscriber
  // connection, whichever process released it; so a process waiting for a lease is woken at
  // once instead of at the lease's expiry. Releases under another key_prefix are not passed on.
  // `on_subscribed` runs each time the subscription is confirmed (the first time included):
  // releases published while it was down are lost, so the caller re-checks what it waits for.
  // The connection reconnects with the store's backoff and subscribes again; it is never
  // polled. Callbacks run on the feed's own thread, one at a time, and must be quick. Errors:
  // none at call time (connecting happens in the background). The feed must not outlive the
  // store. Thread-safe.
  std::unique_ptr<ReleaseFeed> watch_releases(ReleaseWatcher on_release, std::function<void()> on_subscribed);

  struct Impl;

 private:
  explicit RedisStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The Redis key holding `key`'s state under the policy named `policy_name` (the sliding log
// adds "#log" for its sorted set): `<prefix>{<escaped key>}:<policy_name>`. Escaping maps
// '%' '{' '}' to %25 %7B %7D, so the tag holds no brace and distinct keys give distinct names.
// Exposed for tests and operators (redis-cli inspection). Precondition: validate_key(key) ok.
std::string redis_state_key(std::string_view prefix, std::string_view key,
                            std::string_view policy_name);

}  // namespace ratelimit
