// bench.cc — ratelimit-bench's shared pieces (bench_common.h: random keys, the throughput
// policy, connecting a store; bench.h: percentile) and the evalsha-args subcommand (the EVALSHA
// arguments redis-benchmark needs to run our script). The race demonstration is race.cc, the
// throughput load generator throughput.cc.
// Invariants: every wait is bounded; no exception escapes (errors are printed, exit 1).
#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "bench_common.h"
#include "script_codec.h"

namespace ratelimit::bench {

std::string random_key(const char* what) {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "bench:%s:%08x%08x", what, rd(), rd());
  return buf;
}

// The policy a throughput run uses: as the peers' harness, an "allow" limit never reached.
Result<Policy> allow_policy(const std::string& algorithm) {
  auto a = parse_algorithm(algorithm);
  if (!a.ok()) return a.status();
  const Micros second{1'000'000};
  switch (*a) {
    // 60 s as the peers' allow limit (bench/peers/README.md), so 100k keys stay alive between
    // visits exactly as rate-limiter-flexible's do.
    case Algorithm::kFixedWindow: return Policy::fixed_window(1'000'000'000, 60 * second);
    case Algorithm::kSlidingWindowLog: return Policy::sliding_window_log(kMaxSlidingLogLimit, second);
    case Algorithm::kSlidingWindowCounter: return Policy::sliding_window_counter(1'000'000'000, second);
    case Algorithm::kTokenBucket: return Policy::token_bucket(1e9 / 60, 1'000'000'000);
    case Algorithm::kLeakyBucket: return Policy::leaky_bucket(1e9 / 60, 1'000'000'000);
    // Measured as acquire + release pairs (run_throughput): at most `inflight` leases are held
    // on a key at once, far below the limit, so every acquire is admitted.
    case Algorithm::kConcurrency: return Policy::concurrency(kMaxConcurrencyLimit, 60 * second);
  }
  return Status::invalid_argument("unknown algorithm");
}

Result<std::shared_ptr<RedisStore>> connect_store(const std::string& url, size_t connections,
                                                  bool use_functions, size_t max_batch) {
  RedisStoreOptions o;
  o.url = url;
  if (connections > 0) o.connections = connections;
  o.use_functions = use_functions;
  o.max_batch = max_batch;
  o.command_timeout = std::chrono::milliseconds(5000);
  o.on_failure = FailurePolicy::kClosed;
  return RedisStore::connect(o);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

MeasuredWindow measured_window(std::chrono::steady_clock::time_point start, double warmup_s, double seconds) {
  using d = std::chrono::steady_clock::duration;
  const auto from = start + std::chrono::duration_cast<d>(std::chrono::duration<double>(warmup_s));
  return {from, from + std::chrono::duration_cast<d>(std::chrono::duration<double>(seconds))};
}

int run_evalsha_args(const EvalshaArgsOptions& o) {
  auto base = allow_policy(o.algorithm);
  if (!base.ok()) {
    std::cerr << "ratelimit-bench evalsha-args: " << base.status().message() << "\n";
    return 1;
  }
  auto store = connect_store(o.store, 1);  // connecting loads every script (SCRIPT LOAD)
  if (!store.ok()) {
    std::cerr << "ratelimit-bench evalsha-args: " << store.status().message() << "\n";
    return 1;
  }
  const Policy policy = base->with_name("bench").value();
  const std::string key = o.keys > 1 ? "rb:k__rand_int__" : "rb:k0";
  auto call = redis_detail::decide_call((*store)->options().key_prefix, policy, key, 1,
                                        algo::Op::kAcquire, std::nullopt);
  std::printf("EVALSHA %s %zu", redis_detail::kLuaScripts[call.script].sha1, call.keys.size());
  for (const auto& k : call.keys) std::printf(" %s", k.c_str());
  for (const auto& a : call.args) std::printf(" %s", a.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace ratelimit::bench
