// memory_store_bench.cc — ns per decision for every algorithm, through MemoryStore::acquire
// and through the bare algo::decide (the floor: no lock, no lookup, no clock), on one hot key
// and on 100,000 keys, with 1 and 2 threads; plus bytes per key over 1,000,000 keys.
//
// Workloads follow the peers' (bench/peers/README.md) so figures compare with
// rate-limiter-flexible's: every decision is a cost-1 acquire that is never denied (an "allow
// limit"; the `denied` counter must read 0), keys "k0" ... "k99999" are built before timing
// and visited round-robin. With 2 threads each thread has its own keys ("t1:k0", ...), so the
// 2-thread figure shows how the store scales on distinct keys (store_same_key: both threads on
// one key, the contended case). Stores read the system clock
// except where the name says ManualClock (which isolates the cost of reading time).
// Run (see docs/benchmarks/core.md):
//   taskset -c 0 build/bin/ratelimit_microbench --benchmark_filter='threads:1$' ...
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

// Allow-limit policies: never deny at any rate this machine reaches. (Windows are 1 s rather
// than the harness's 60 s because Policy keeps limit * window_us <= 2^53.) Named "api", as a
// ratelimitd configuration names its policies; see default_name_policy for the other case.
Policy unnamed_allow_policy(Algorithm a) {
  const Micros second{1'000'000};
  switch (a) {
    case Algorithm::kFixedWindow: return Policy::fixed_window(1'000'000'000, second).value();
    case Algorithm::kSlidingWindowLog:
      // The log's limit is capped (kMaxSlidingLogLimit = 100,000): 100,000 per 1 ms is 1e8/s.
      return Policy::sliding_window_log(kMaxSlidingLogLimit, Micros{1'000}).value();
    case Algorithm::kSlidingWindowCounter:
      return Policy::sliding_window_counter(1'000'000'000, second).value();
    case Algorithm::kTokenBucket: return Policy::token_bucket(1e9 / 60, 1'000'000'000).value();
    case Algorithm::kLeakyBucket: return Policy::leaky_bucket(1e9 / 60, 1'000'000'000).value();
    // Not in the benchmarks below (acquires without releases would fill it): leases are measured
    // as acquire + release pairs by ratelimit-bench throughput --algorithm concurrency.
    case Algorithm::kConcurrency: return Policy::concurrency(kMaxConcurrencyLimit, second).value();
  }
  return Policy::fixed_window(1, second).value();
}

Policy allow_policy(Algorithm a) { return unnamed_allow_policy(a).with_name("api").value(); }

const std::vector<std::string>& keys_for_thread(int thread) {
  static const auto* const all = [] {
    auto* v = new std::vector<std::vector<std::string>>(2);
    for (int t = 0; t < 2; ++t) {
      (*v)[static_cast<size_t>(t)].reserve(100'000);
      for (int i = 0; i < 100'000; ++i) {
        (*v)[static_cast<size_t>(t)].push_back((t == 0 ? "k" : "t1:k") + std::to_string(i));
      }
    }
    return v;
  }();
  return (*all)[static_cast<size_t>(thread % 2)];
}

// One store per benchmark (shared by its threads), created before any thread starts timing.
MemoryStore& store_for(const std::string& name, const Clock* clock = nullptr) {
  static std::mutex mu;
  static auto* stores = new std::vector<std::pair<std::string, std::unique_ptr<MemoryStore>>>();
  std::lock_guard lock(mu);
  for (auto& [n, s] : *stores) {
    if (n == name) return *s;
  }
  MemoryStoreOptions o;
  o.clock = clock;
  stores->emplace_back(name, std::make_unique<MemoryStore>(o));
  return *stores->back().second;
}

// An acquire made to fill the store (warm-up, a key flood, the memory figures): its decision does
// not matter, but an error would mean the figure measures something else, so it stops the run.
void fill(const Result<Decision>& r) {
  if (!r.ok()) {
    std::fprintf(stderr, "memory_store_bench: a filling acquire failed: %s\n",
                 r.status().to_string().c_str());
    std::abort();
  }
}

void report(benchmark::State& state, int64_t denied) {
  state.counters["denied"] = benchmark::Counter(static_cast<double>(denied), benchmark::Counter::kAvgThreads);
  state.SetItemsProcessed(state.iterations());
}

// MemoryStore::acquire; nkeys = 1 (hot key) or 100,000 (round-robin). `default_name`: the
// policy keeps its long canonical name ("token_bucket:r16666666.666666666:b1000000000").
void BM_Store(benchmark::State& state, Algorithm a, size_t nkeys, bool manual_clock,
              bool default_name, bool shared_keys) {
  static ManualClock manual(Micros{1'000'000});
  const Policy policy = default_name ? unnamed_allow_policy(a) : allow_policy(a);
  MemoryStore& store = store_for(std::string(algorithm_name(a)) + std::to_string(nkeys) +
                                     (manual_clock ? "m" : "") + (default_name ? "d" : "") +
                                     (shared_keys ? "s" : ""),
                                 manual_clock ? &manual : nullptr);
  const auto& keys = keys_for_thread(shared_keys ? 0 : state.thread_index());
  for (size_t i = 0; i < nkeys; ++i) fill(store.acquire(policy, keys[i]));  // warm-up: insert all
  size_t i = 0;
  int64_t denied = 0;
  for (auto _ : state) {
    auto d = store.acquire(policy, keys[i]);
    denied += d->allowed ? 0 : 1;
    if (++i == nkeys) i = 0;
  }
  report(state, denied);
}

// A key flood: every acquire is a new key into a store already full (max_keys 100,000), so
// each one evicts; the cost of choosing what to evict (issue 12).
void BM_Flood(benchmark::State& state, Algorithm a) {
  const Policy policy = allow_policy(a);
  MemoryStoreOptions o;
  o.max_keys = 100'000;
  MemoryStore store(o);
  std::string key = "f";
  uint64_t i = 0;
  for (; i < 200'000; ++i) fill(store.acquire(policy, key.replace(1, std::string::npos, std::to_string(i))));
  int64_t denied = 0;
  for (auto _ : state) {
    auto d = store.acquire(policy, key.replace(1, std::string::npos, std::to_string(i++)));
    denied += d->allowed ? 0 : 1;
  }
  report(state, denied);
}

// The bare algorithm on states held by the benchmark: no lock, no lookup, no clock read.
void BM_Pure(benchmark::State& state, Algorithm a, size_t nkeys) {
  const Policy policy = allow_policy(a);
  std::vector<algo::AlgorithmState> states(nkeys, algo::fresh_state(policy));
  int64_t now = 1'000'000;
  size_t i = 0;
  int64_t denied = 0;
  for (auto _ : state) {
    now += 1;  // time moves as it would between requests (the log expires its entries)
    const Decision d = algo::decide(policy, states[i], now, 1, algo::Op::kAcquire);
    denied += d.allowed ? 0 : 1;
    if (++i == nkeys) i = 0;
  }
  report(state, denied);
}

void BM_SystemClockNow(benchmark::State& state) {
  const Clock& clock = SystemClock::instance();
  for (auto _ : state) benchmark::DoNotOptimize(clock.now());
}

int64_t allocated_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Policies whose keys stay live (not idle) for the whole measurement, so none is swept.
Policy memory_policy(Algorithm a) {
  const Micros hour{3'600'000'000};
  Policy p = Policy::fixed_window(100, hour).value();
  switch (a) {
    case Algorithm::kFixedWindow: break;
    case Algorithm::kSlidingWindowLog: p = Policy::sliding_window_log(100, hour).value(); break;
    case Algorithm::kSlidingWindowCounter:
      p = Policy::sliding_window_counter(100, hour).value();
      break;
    case Algorithm::kTokenBucket: p = Policy::token_bucket(0.01, 100).value(); break;
    case Algorithm::kLeakyBucket: p = Policy::leaky_bucket(0.01, 100).value(); break;
    case Algorithm::kConcurrency: p = Policy::concurrency(100, hour).value(); break;  // one lease
  }
  return p.with_name("api").value();
}

// Bytes per key: 1,000,000 distinct keys ("k" + i, built on the fly, not retained), one
// acquire each, into a store with room for all of them. Allocator bytes in use (mallinfo2
// uordblks + hblkhd) and RSS, after minus before, divided by the number of keys.
void BM_BytesPerKey(benchmark::State& state, Algorithm a, const char* key_prefix) {
  constexpr int kKeys = 1'000'000;
  const Policy policy = memory_policy(a);
  for (auto _ : state) {
    malloc_trim(0);
    const int64_t heap0 = allocated_bytes();
    const int64_t rss0 = rss_bytes();
    MemoryStoreOptions o;
    o.max_keys = 2 * kKeys;  // no eviction
    auto store = std::make_unique<MemoryStore>(o);
    std::string key = key_prefix;
    const size_t base = key.size();
    for (int i = 0; i < kKeys; ++i) {
      key.resize(base);
      key += std::to_string(i);
      fill(store->acquire(policy, key));
    }
    const int64_t heap1 = allocated_bytes();
    const int64_t rss1 = rss_bytes();
    state.counters["keys"] = static_cast<double>(store->key_count());
    state.counters["heap_B_per_key"] = static_cast<double>(heap1 - heap0) / kKeys;
    state.counters["rss_B_per_key"] = static_cast<double>(rss1 - rss0) / kKeys;
    store.reset();
  }
}

// The sliding log's plateau (issue 12's shape): `nkeys` keys on 500 per 5 s, every key getting
// `per_second` requests a second for 15 simulated seconds (ManualClock), optionally after a
// burst of 500 per key. Allocator bytes and the store's own count per key at the end, and the
// live entries per key, so the figure can be checked against 81 + 16-32 B per live entry.
void BM_LogPlateau(benchmark::State& state, int per_second, bool burst_first, int kKeys) {
  const Policy policy = Policy::sliding_window_log(500, Micros{5'000'000}).value()
                            .with_name("api").value();
  for (auto _ : state) {
    ManualClock clock(Micros{1'000'000});
    malloc_trim(0);
    const int64_t heap0 = allocated_bytes();
    MemoryStoreOptions o;
    o.max_keys = 2 * kKeys;
    o.max_bytes = size_t{8} << 30;  // measure the representation, not the bound
    o.clock = &clock;
    auto store = std::make_unique<MemoryStore>(o);
    std::vector<std::string> keys;
    keys.reserve(kKeys);
    for (int i = 0; i < kKeys; ++i) keys.push_back("k" + std::to_string(i));
    const int64_t keys_bytes = allocated_bytes() - heap0;
    if (burst_first) {
      for (const std::string& k : keys) {
        for (int r = 0; r < 500; ++r) fill(store->acquire(policy, k));
      }
      clock.advance(Micros{5'000'000});
    }
    const Micros step{1'000'000 / per_second};
    for (int64_t n = 0; n < 15LL * per_second; ++n) {
      for (const std::string& k : keys) fill(store->acquire(policy, k));
      clock.advance(step);
    }
    const int64_t heap1 = allocated_bytes();
    state.counters["heap_B_per_key"] =
        static_cast<double>(heap1 - heap0 - keys_bytes) / kKeys;
    state.counters["counted_B_per_key"] = static_cast<double>(store->bytes()) / kKeys;
    state.counters["live_per_key"] = static_cast<double>(
        500 - store->peek(policy, keys[0])->remaining - 1);
    store.reset();
  }
}

constexpr Algorithm kAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                     Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                     Algorithm::kLeakyBucket};

int register_all() {
  for (Algorithm a : kAlgorithms) {
    const std::string name = algorithm_name(a);
    benchmark::RegisterBenchmark(("store/hot/" + name).c_str(), BM_Store, a, 1, false, false, false)
        ->Threads(1)->Threads(2)->UseRealTime();
    benchmark::RegisterBenchmark(("store/100k/" + name).c_str(), BM_Store, a, 100'000, false, false, false)
        ->Threads(1)->Threads(2)->UseRealTime();
    benchmark::RegisterBenchmark(("store/flood/" + name).c_str(), BM_Flood, a)->Threads(1);
    benchmark::RegisterBenchmark(("pure/hot/" + name).c_str(), BM_Pure, a, 1)->Threads(1);
    benchmark::RegisterBenchmark(("pure/100k/" + name).c_str(), BM_Pure, a, 100'000)->Threads(1);
  }
  benchmark::RegisterBenchmark("store_manual_clock/hot/token_bucket", BM_Store,
                               Algorithm::kTokenBucket, 1, true, false, false)
      ->Threads(1)->Threads(2)->UseRealTime();
  // Negative control for the 2-thread figures: both threads on the same key (one shard, one
  // mutex, one cache line bouncing between the cores).
  benchmark::RegisterBenchmark("store_same_key/hot/token_bucket", BM_Store,
                               Algorithm::kTokenBucket, 1, false, false, true)
      ->Threads(2)->UseRealTime();
  benchmark::RegisterBenchmark("store_default_name/hot/token_bucket", BM_Store,
                               Algorithm::kTokenBucket, 1, false, true, false)
      ->Threads(1)->UseRealTime();
  benchmark::RegisterBenchmark("system_clock_now", BM_SystemClockNow)->Threads(1);
  for (Algorithm a : kAlgorithms) {
    const std::string name = algorithm_name(a);
    benchmark::RegisterBenchmark(("memory/short_key/" + name).c_str(), BM_BytesPerKey, a, "k")
        ->Iterations(1)->Unit(benchmark::kMillisecond)->Threads(1);
  }
  struct Plateau {
    int per_second;
    bool burst;
    int keys;
  };
  for (Plateau c : {Plateau{1, false, 50'000}, Plateau{1, true, 50'000},
                    Plateau{20, false, 50'000}, Plateau{100, false, 5'000}}) {
    benchmark::RegisterBenchmark(("memory/log_plateau/" + std::to_string(c.keys) + "_keys/" +
                                  std::to_string(c.per_second) + "_per_s" +
                                  (c.burst ? "_after_burst" : "")).c_str(),
                                 BM_LogPlateau, c.per_second, c.burst, c.keys)
        ->Iterations(1)->Unit(benchmark::kMillisecond)->Threads(1);
  }
  benchmark::RegisterBenchmark("memory/long_key/token_bucket", BM_BytesPerKey,
                               Algorithm::kTokenBucket, "user:0123456789abcdef:")
      ->Iterations(1)->Unit(benchmark::kMillisecond)->Threads(1);
  return 0;
}

const int registered = register_all();

}  // namespace
}  // namespace ratelimit

BENCHMARK_MAIN();
