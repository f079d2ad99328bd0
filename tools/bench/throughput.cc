// throughput.cc — ratelimit-bench throughput: the load generator. A closed loop of `inflight`
// decisions (memory store: `threads` threads calling it; Redis: chains of async calls, each
// issuing the next from its completion) over `keys` keys, warmed up, then measured for
// `seconds`: decisions per second, latency percentiles, and the server's CPU when asked. A
// concurrency policy is measured as acquire + release pairs.
// Invariants: every wait is bounded; no exception escapes (errors are printed, exit 1); the
// Redis path's completions allocate nothing of their own per decision (see Chains below).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench.h"
#include "bench_common.h"
#include "closed_loop.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/policy.h"
#include "ratelimit/redis_store.h"

namespace ratelimit::bench {
namespace {

using std::chrono::duration;
using std::chrono::steady_clock;

// utime + stime of process `pid` in seconds, from /proc/<pid>/stat (fields 14 and 15, in
// clock ticks); -1 when it cannot be read. Covers every thread of the process.
double process_cpu_seconds(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[2048];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces
  if (p == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  // After ") ": state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt, majflt,
  // cmajflt, utime, stime.
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2) {
    return -1;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Memory store: one decision in this many is timed for the latency percentiles.
constexpr int kSampleEvery = 64;

// The progress line of a throughput run: on a terminal (stderr is a tty), one line rewritten a
// few times a second ("measuring 2.0/5.0 s, 11.8 M decisions/s"); otherwise nothing at all, so
// logs and pipes get only the result lines.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) == 1) {}
  void show(const std::string& text) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[Kratelimit-bench: %s", text.c_str());
    std::fflush(stderr);
  }
  // Sleeps `seconds`, updating the line every 250 ms; `count` (may be null) gives the
  // decisions completed so far in this stage, for a running rate.
  void wait(double seconds, const char* stage, const std::function<uint64_t()>& count) {
    const auto start = steady_clock::now();
    const auto end = start + std::chrono::duration_cast<steady_clock::duration>(duration<double>(seconds));
    for (;;) {
      const auto now = steady_clock::now();
      const double elapsed = duration<double>(now - start).count();
      char line[128];
      if (count && elapsed > 0) {
        std::snprintf(line, sizeof line, "%s %.1f/%.1f s, %.2f M decisions/s", stage, elapsed,
                      seconds, static_cast<double>(count()) / elapsed / 1e6);
      } else {
        std::snprintf(line, sizeof line, "%s %.1f/%.1f s", stage, elapsed, seconds);
      }
      show(line);
      if (now >= end) return;
      std::this_thread::sleep_until(std::min(end, now + std::chrono::milliseconds(250)));
    }
  }
  void clear() {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  bool tty_;
};

}  // namespace

int run_throughput(const ThroughputOptions& o) {
  auto base = allow_policy(o.algorithm);
  if (!base.ok()) {
    std::cerr << "ratelimit-bench throughput: " << base.status().message() << "\n";
    return 1;
  }
  const Policy policy = base->with_name("bench").value();
  const bool pairs = policy.is_concurrency();  // a unit of work is an acquire + release pair
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(o.keys));
  const std::string prefix = random_key("tp") + ":k";
  for (int64_t i = 0; i < o.keys; ++i) keys.push_back(prefix + std::to_string(i));

  std::shared_ptr<Store> store;
  std::shared_ptr<RedisStore> redis;  // the same store when it is Redis: its batch counters
  const bool memory = o.store == "memory";
  if (memory) {
    store = std::make_shared<MemoryStore>();
  } else {
    auto s = connect_store(o.store, o.connections, !o.no_functions, o.max_batch);
    if (!s.ok()) {
      std::cerr << "ratelimit-bench throughput: " << s.status().message() << "\n";
      return 1;
    }
    store = *s;
    redis = *s;
  }

  // Workers (memory: threads; Redis: chains of async calls) each record their own counts and
  // latencies, on a cache line of their own so that two threads never share one.
  const int workers = memory ? o.threads : o.inflight;
  struct alignas(64) Worker {
    std::vector<double> lat_us;
    std::atomic<uint64_t> done{0};  // written by its owner only; read by the progress line
    uint64_t denied = 0, failed = 0;
  };
  std::vector<Worker> w(static_cast<size_t>(workers));
  std::atomic<int> phase{0};  // 0 warm-up, 1 measuring, 2 stopping
  std::atomic<int> running{0};
  Progress progress;
  auto done_so_far = [&] {
    uint64_t n = 0;
    for (const auto& x : w) n += x.done.load(std::memory_order_relaxed);
    return n;
  };

  // Warm-up pass: every key once (with the same concurrency), so 100k keys exist. (Leases are
  // not created ahead: a released lease leaves no key behind.)
  if (o.keys > 1 && !pairs) {
    progress.show("creating " + std::to_string(o.keys) + " keys");
    Tally t;
    const bool created = closed_loop(static_cast<int>(o.keys), workers,
                                     [&](int i, std::function<void(Outcome)> done) {
                                       store->acquire_async(
                                           policy, keys[static_cast<size_t>(i)], 1,
                                           [done = std::move(done)](Result<Decision> d) {
                                             done(outcome_of(d));
                                           });
                                     },
                                     t, std::chrono::seconds(600));
    if (!created) {  // the figures would be of a store still filling
      std::cerr << "ratelimit-bench: creating the keys did not finish in 600 s\n";
      return 1;
    }
  }

  std::vector<std::thread> threads;
  // Redis: each worker is a chain of async calls — issue, and on completion issue again, from
  // the completion itself (on the store's I/O thread: no hop to another thread). The chains
  // share one round-robin cursor over the keys. The completion captures only the chain and its
  // start time (16 bytes, which std::function keeps without allocating), so the load generator
  // adds no heap allocation of its own per decision.
  struct Chains {
    const std::vector<std::string>& keys;
    const Policy& policy;
    Store& store;
    std::vector<Worker>& w;
    std::atomic<int>& phase;
    std::atomic<int>& running;
    std::atomic<uint64_t> next_key{0};
  };
  struct Link {
    Chains* chains;
    size_t i;
  };
  std::vector<Link> links(w.size());
  Chains chains{keys, policy, *store, w, phase, running};
  struct Issue {
    static void next(const Link* link) {
      Chains& c = *link->chains;
      const auto t0 = steady_clock::now();
      const std::string& key =
          c.keys[c.next_key.fetch_add(1, std::memory_order_relaxed) % c.keys.size()];
      if (c.policy.is_concurrency()) return pair(link, key, t0);
      c.store.acquire_async(c.policy, key, 1, [link, t0](Result<Decision> d) {
        finish(link, t0, outcome_of(d));
      });
    }
    // A concurrency policy: one unit of work is an acquire and, once it is answered, the
    // release of its lease (a second store call); the pair's latency is both. (Its completion
    // holds three words, so std::function allocates here, unlike the rate path.)
    static void pair(const Link* link, const std::string& key, steady_clock::time_point t0) {
      Chains& c = *link->chains;
      c.store.acquire_async(c.policy, key, 1, [link, t0, k = &key](Result<Decision> d) {
        Chains& ch = *link->chains;
        if (!d.ok() || !d->allowed || d->lease.empty()) return finish(link, t0, outcome_of(d));
        ch.store.release_async(ch.policy, *k, d->lease, [link, t0](Result<Decision> r) {
          Outcome oc = outcome_of(r);
          if (r.ok() && r->reason == DecisionReason::kLeaseNotHeld) oc = Outcome::kError;
          finish(link, t0, oc);
        });
      });
    }
    // One unit of work answered (a decision, or an acquire + release pair): counted while
    // measuring, then the chain issues the next one or stops.
    static void finish(const Link* link, steady_clock::time_point t0, Outcome oc) {
      Chains& ch = *link->chains;
      const int p = ch.phase.load(std::memory_order_acquire);
      if (p == 1) {
        // A Redis decision takes microseconds: timing every one costs nothing measurable.
        auto& me = ch.w[link->i];
        me.done.fetch_add(1, std::memory_order_relaxed);
        if (oc == Outcome::kDenied) ++me.denied;
        if (oc == Outcome::kFailed || oc == Outcome::kError) ++me.failed;
        me.lat_us.push_back(duration<double, std::micro>(steady_clock::now() - t0).count());
      }
      // A failure may complete inline; stopping the chain then avoids unbounded recursion.
      if (p == 2 || oc == Outcome::kFailed || oc == Outcome::kError) {
        ch.running.fetch_sub(1);
        return;
      }
      next(link);
    }
  };
  running = workers;
  if (memory) {
    // A memory decision takes ~100 ns, as long as two clock reads: so only one decision in
    // kSampleEvery is timed, the phase is read once per batch of that size, and each thread
    // walks the key set with its own cursor (no shared counter, no copy of the key).
    for (size_t i = 0; i < w.size(); ++i) {
      threads.emplace_back([&, i] {
        auto& me = w[i];
        me.lat_us.reserve(1 << 16);
        size_t k = i * keys.size() / w.size();
        for (;;) {
          const int p = phase.load(std::memory_order_acquire);
          if (p == 2) break;
          for (int b = 0; b < kSampleEvery; ++b) {
            const bool timed = b == 0 && p == 1;
            const auto t0 = timed ? steady_clock::now() : steady_clock::time_point{};
            auto d = store->acquire(policy, keys[k], 1);
            if (pairs && d.ok() && d->allowed) {
              auto r = store->release(policy, keys[k], d->lease);
              if (!r.ok() || r->reason != DecisionReason::kWithinLimit) d = Status::internal("release failed");
            }
            if (timed) {
              me.lat_us.push_back(duration<double, std::micro>(steady_clock::now() - t0).count());
            }
            if (p == 1) {
              const Outcome oc = outcome_of(d);
              if (oc == Outcome::kDenied) ++me.denied;
              if (oc == Outcome::kFailed || oc == Outcome::kError) ++me.failed;
            }
            if (++k == keys.size()) k = 0;
          }
          if (p == 1) me.done.fetch_add(kSampleEvery, std::memory_order_relaxed);
        }
        running.fetch_sub(1);
      });
    }
  } else {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i].lat_us.reserve(1 << 13);
      links[i] = Link{&chains, i};
      Issue::next(&links[i]);
    }
  }
  progress.wait(o.warmup_seconds, "warm-up", nullptr);
  const double server0 = o.server_pid > 0 ? process_cpu_seconds(o.server_pid) : -1;
  const double client0 = process_cpu_seconds(getpid());
  const RedisStoreCounters counters0 = redis != nullptr ? redis->counters() : RedisStoreCounters{};
  const auto start = steady_clock::now();
  phase = 1;
  progress.wait(o.seconds, "measuring", done_so_far);
  phase = 2;
  const double elapsed = duration<double>(steady_clock::now() - start).count();
  const double server1 = o.server_pid > 0 ? process_cpu_seconds(o.server_pid) : -1;
  const double client1 = process_cpu_seconds(getpid());
  const RedisStoreCounters counters1 = redis != nullptr ? redis->counters() : RedisStoreCounters{};
  progress.clear();
  for (int i = 0; i < 10'000 && running.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& t : threads) t.join();
  if (running.load() > 0) {
    std::cerr << "ratelimit-bench throughput: calls did not drain\n";
    return 1;
  }
  if (o.server_pid > 0 && (server0 < 0 || server1 < 0)) {
    std::cerr << "ratelimit-bench throughput: cannot read /proc/" << o.server_pid << "/stat\n";
    return 1;
  }
  std::vector<double> lat;
  uint64_t done = 0, denied = 0, failed = 0;
  for (auto& x : w) {
    done += x.done.load(std::memory_order_relaxed);
    denied += x.denied;
    failed += x.failed;
    lat.insert(lat.end(), x.lat_us.begin(), x.lat_us.end());
  }
  const double rate = static_cast<double>(done) / elapsed;
  const double p50 = percentile(lat, 0.50);
  const double p99 = percentile(lat, 0.99);
  // Server CPU as a fraction of one core over the measured window (-1: not measured).
  const double server_cpu = o.server_pid > 0 ? (server1 - server0) / elapsed : -1;
  // With a concurrency policy every figure is per acquire + release pair.
  const char* unit = pairs ? "pair" : "decision";
  std::printf("store=%s algorithm=%s keys=%lld %s=%d seconds=%.1f %ss/s=%.0f p50_us=%.1f "
              "p99_us=%.1f denied=%llu failed=%llu",
              memory ? "memory" : "redis", o.algorithm.c_str(), static_cast<long long>(o.keys),
              memory ? "threads" : "inflight", workers, elapsed, unit, rate, p50, p99,
              static_cast<unsigned long long>(denied), static_cast<unsigned long long>(failed));
  if (server_cpu >= 0) {
    std::printf(" server_cpu=%.3f server_us_per_%s=%.2f", server_cpu, unit,
                done > 0 ? server_cpu * 1e6 / rate : 0.0);
  }
  // This process' CPU (every thread) over the same window, as a fraction of one core: what a
  // decision costs the client. /proc's ticks are 10 ms, so a 3 s window is good to ~1 %.
  const double client_cpu = client0 >= 0 && client1 >= 0 ? (client1 - client0) / elapsed : -1;
  if (client_cpu >= 0) {
    std::printf(" client_cpu=%.3f client_us_per_%s=%.2f", client_cpu, unit,
                done > 0 ? client_cpu * 1e6 / rate : 0.0);
  }
  if (redis != nullptr) {
    // Decisions per Redis call over the window: a call carries one decision or a batch.
    const uint64_t batches = counters1.batches - counters0.batches;
    const uint64_t batched = counters1.batched_decisions - counters0.batched_decisions;
    const uint64_t decided = pairs ? 2 * done : done;  // store decisions (a pair is two)
    const uint64_t calls = batches + (decided > batched ? decided - batched : 0);
    std::printf(" decisions_per_call=%.1f",
                calls > 0 ? static_cast<double>(decided) / static_cast<double>(calls) : 0.0);
  }
  std::printf("\n");
  if (!o.json_peer.empty()) {
    const std::string workload =
        memory ? (o.keys == 1 ? "inproc.hot" : "inproc.100k")
               : "remote.c" + std::to_string(o.inflight) + (o.keys == 1 ? ".hot" : ".100k");
    std::printf("{\"peer\": \"%s\", \"workload\": \"%s\", \"metric\": \"decisions_per_s\", "
                "\"value\": %.1f, \"unit\": \"ops/s\", \"ops\": %llu, \"seconds\": %.3f, "
                "\"p50_us\": %.0f, \"p99_us\": %.0f, \"denied\": %llu, \"errors\": %llu",
                o.json_peer.c_str(), workload.c_str(), rate, static_cast<unsigned long long>(done),
                elapsed, p50, p99, static_cast<unsigned long long>(denied),
                static_cast<unsigned long long>(failed));
    if (server_cpu >= 0) std::printf(", \"server_cpu\": %.4f", server_cpu);
    if (client_cpu >= 0) std::printf(", \"client_cpu\": %.4f", client_cpu);
    std::printf("}\n");
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace ratelimit::bench
