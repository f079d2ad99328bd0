// bench.h — what ratelimit-bench does, as functions main.cc calls after parsing flags.
//
//   race        fires N acquires at one fresh key with C in flight and counts what was
//               admitted: the real store (exact: one atomic Lua call per decision) or, with
//               --naive, a deliberately non-atomic GET-then-INCR limiter that over-admits.
//   throughput  closed-loop load (C decisions in flight) through a Store, on 1 key or many,
//               printing decisions/s and latency percentiles. On the memory store one
//               decision in 64 is timed (two clock reads cost as much as a decision), so the
//               rate is that of untimed decisions; on Redis every decision is timed. A progress
//               line is drawn on stderr when it is a terminal, never otherwise.
//   rls         closed-loop gRPC load on a running ratelimitd's Envoy ShouldRateLimit (C calls
//               in flight on one channel): decisions/s, p50/p99 latency (rls_load.cc).
//   evalsha-args  the EVALSHA arguments of one decision, so redis-benchmark can measure the
//               ceiling of the same script on the same Redis (loads the scripts first).
// Every function returns a process exit code (0 ok, 1 failure) and prints errors to stderr;
// none throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ratelimit::bench {

struct RaceOptions {
  std::string store;             // redis://... or unix://...
  int requests = 200;
  int concurrency = 50;
  int64_t limit = 10;
  std::string algorithm = "sliding_window_log";
  bool naive = false;
  std::string key;               // empty: a fresh random key
  size_t connections = 0;        // 0: the store's default
  int64_t start_at_unix_ms = 0;  // 0: at once; else wait for this wall-clock time
  bool json = false;
};
int run_race(const RaceOptions& o);

struct ThroughputOptions {
  std::string store;  // "memory" or a Redis URL
  std::string algorithm = "token_bucket";
  int64_t keys = 1;
  int inflight = 50;
  int threads = 1;  // memory store: threads calling it (each one decision at a time)
  double seconds = 5;
  double warmup_seconds = 1;
  size_t connections = 0;
  std::string json_peer;  // non-empty: also print one JSON line in the peers' format
  int server_pid = 0;     // > 0: report this process' CPU (/proc/<pid>/stat) over the window
  bool no_functions = false;  // Redis: EVALSHA only (RedisStoreOptions::use_functions = false)
  size_t max_batch = 64;      // Redis: RedisStoreOptions::max_batch (1: no batching)
};
int run_throughput(const ThroughputOptions& o);

struct RlsOptions {
  std::string target = "127.0.0.1:8081";  // ratelimitd's grpc_listen / GRPC_HOST:GRPC_PORT
  std::string domain = "bench";
  std::string key = "user";  // the one entry's key; values "hot" (keys 1) or v0 ... v<keys-1>
  int64_t keys = 1;
  int inflight = 100;
  double seconds = 10;
  double warmup_seconds = 2;
  std::string json_peer;  // non-empty: also print one JSON line in the peers' format
  std::string workload;   // its workload name (default rls.c<inflight>)
  bool full_stack = false;  // gRPC's default client filters (retries, deadline timer, ...)
};
int run_rls(const RlsOptions& o);

struct RlqsOptions {
  std::string target = "127.0.0.1:8081";  // ratelimitd's grpc_listen (with an `rlqs:` section)
  std::string domain = "envoy";
  int streams = 100;            // Envoy clients, one stream each
  int channels = 0;             // HTTP/2 connections (0: one per stream, as each Envoy has its own)
  int64_t buckets = 1;          // buckets per report message
  int64_t bucket_space = 0;     // distinct buckets (0: = buckets, every stream reports the same ones)
  double interval = 1;          // seconds between a stream's reports (0: as fast as answered)
  double seconds = 10;
  double warmup_seconds = 3;
  std::string json_peer;        // non-empty: also print one JSON line with this peer name
  std::string workload = "rlqs";
};
int run_rlqs(const RlqsOptions& o);

// `ratelimit-bench adaptive` (adaptive_load.cc): a backend of `workers` x `service_ms` behind
// ratelimitd's leases on `policy`/`key` at --target, driven open loop through three phases.
struct AdaptiveOptions {
  std::string target = "127.0.0.1:8080";  // ratelimitd's HTTP listener
  std::string policy = "db", key = "backend";
  int workers = 20;
  double service_ms = 20, jitter = 0.1, timeout_ms = 1000;
  double unloaded = 0.3, load = 3;  // multiples of the capacity
  double unloaded_seconds = 5, loaded_seconds = 20, halved_seconds = 20;  // halved 0: no halving
  int clients = 400;  // client threads, each with one connection (enough for max_limit in flight)
  uint64_t seed = 30;
  double critical_share = -1;  // >= 0: arrivals name a class, critical with this probability
  bool json = false;
};
int run_adaptive(const AdaptiveOptions& o);

struct EvalshaArgsOptions {
  std::string store;
  std::string algorithm = "token_bucket";
  int64_t keys = 1;  // > 1: key contains __rand_int__ (use redis-benchmark -r keys)
};
int run_evalsha_args(const EvalshaArgsOptions& o);

// The p-quantile (0 ... 1) of `v` (reordered); 0 when empty.
double percentile(std::vector<double>& v, double p);

// A load generator's measured window: it starts `warmup_s` after `start` and lasts `seconds`.
struct MeasuredWindow {
  std::chrono::steady_clock::time_point from, to;
};
MeasuredWindow measured_window(std::chrono::steady_clock::time_point start, double warmup_s, double seconds);

}  // namespace ratelimit::bench
