// adaptive_load.cc — `ratelimit-bench adaptive`: issue 30's done-when run against the real
// ratelimitd. A backend with a capacity (in this process: `workers` threads serving a FIFO,
// each request `service` ms ±`jitter`, so capacity = workers / service) sits behind ratelimitd's
// leases on one key of one concurrency policy. Poisson arrivals (open loop: the schedule never
// waits for answers) at a multiple of the capacity, in three phases: unloaded (`--unloaded`, the
// reference p99), loaded (`--load`), and loaded with half the workers (`--halved-seconds` > 0).
// Each arrival: POST /v1/leases → 429 (refused) or a lease; the request then queues for a worker,
// and the lease is released with its outcome (`timeout` when the answer came later than
// `--timeout`, else none: ratelimitd measures grant → release). Latency is arrival → answer, so a
// client thread's own delay counts against the server (no coordinated omission).
//
// Prints, per phase: goodput (answers within the timeout) per second against the capacity,
// refused %, p50/p99 of admitted requests, the learned limit's range (the lease answers'
// "limit"); then the done-when figures: loaded p99 / unloaded p99, goodput / capacity, and after
// the halving the seconds until the limit is within 10 % of where it settles (the median of the
// phase's last 5 s), the p99 of the phase's second half (where it settled), and the seconds
// until a second's p99 is back within 2× unloaded for good (-1: never within the phase).
// --json adds one line with every figure and the limit's trajectory per second.
// --critical-share S (issue 30's classes): each arrival names `"priority":"critical"` with
// probability S, else "sheddable" (the policy must list both); the loaded phase's arrivals are
// then also counted by class — refused, and the time to the lease answer (the wait) of the
// admitted ones.
// Invariants: every socket read/write is bounded (5 s); a reply other than 200/429 is counted
// as an error and exits 1; only --target is contacted.
#include <absl/synchronization/mutex.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench.h"
#include "http_client.h"

namespace ratelimit::bench {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::duration;

double ms_since(steady::time_point from, steady::time_point to) { return duration<double, std::milli>(to - from).count(); }

// The backend: `workers` threads, of which the first `active` serve a FIFO.
class Backend {
 public:
  struct Job {
    bool done = false;
    steady::time_point answered;
    absl::CondVar cv;
  };
  Backend(int workers, double service_ms, double jitter) : active_(workers), service_ms_(service_ms), jitter_(jitter) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { serve(i); });
  }
  ~Backend() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      work_.SignalAll();
    }
    for (auto& t : threads_) t.join();
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  void resize(int active) {
    absl::MutexLock lock(&mu_);
    active_ = active;
    work_.SignalAll();
  }
  // Queues `job` and returns once a worker has served it.
  void call(Job& job) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(&job);
    work_.SignalAll();  // an idle worker may be one of the inactive ones
    while (!job.done) job.cv.Wait(&mu_);
  }

 private:
  void serve(int index) {
    std::mt19937_64 rng(static_cast<uint64_t>(index) * 7919 + 1);
    std::uniform_real_distribution<double> u(-jitter_, jitter_);
    for (;;) {
      Job* job;
      {
        absl::MutexLock lock(&mu_);
        while (!stop_ && (index >= active_ || queue_.empty())) work_.Wait(&mu_);
        if (stop_) return;
        job = queue_.front();
        queue_.pop_front();
      }
      std::this_thread::sleep_for(duration<double, std::milli>(service_ms_ * (1 + u(rng))));
      absl::MutexLock lock(&mu_);
      job->answered = steady::now();
      job->done = true;
      job->cv.Signal();
    }
  }
  absl::Mutex mu_;
  absl::CondVar work_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  const double service_ms_, jitter_;
  std::vector<std::thread> threads_;
};

struct Second {
  int64_t admitted = 0, refused = 0, good = 0, limit_min = INT64_MAX, limit_max = 0, limit_last = 0;
  std::vector<double> latencies;
};

struct Phase {
  const char* name;
  double load, seconds;
  int workers;
  double from_s = 0;  // run time at which it starts
};

}  // namespace

int run_adaptive(const AdaptiveOptions& o) {
  const size_t colon = o.target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "ratelimit-bench adaptive: --target must be HOST:PORT\n");
    return 2;
  }
  const std::string host = o.target.substr(0, colon);
  const int port = std::atoi(o.target.c_str() + colon + 1);
  const double capacity = o.workers * 1000.0 / o.service_ms;
  std::vector<Phase> phases{{"unloaded", o.unloaded, o.unloaded_seconds, o.workers},
                            {"loaded", o.load, o.loaded_seconds, o.workers}};
  if (o.halved_seconds > 0) phases.push_back({"halved", o.load, o.halved_seconds, std::max(1, o.workers / 2)});
  double total = 0;
  for (auto& p : phases) {
    p.from_s = total;
    total += p.seconds;
  }
  const int seconds = static_cast<int>(std::ceil(total));

  Backend backend(o.workers, o.service_ms, o.jitter);
  absl::Mutex mu;
  absl::CondVar arrived;
  std::vector<Second> per_second(static_cast<size_t>(seconds) + 1);
  std::deque<std::pair<steady::time_point, int>> arrivals;  // scheduled (time, class), not yet taken
  struct PerClass {
    int64_t offered = 0, admitted = 0, refused = 0;
    std::vector<double> waits;  // ms from arrival to the lease answer, admitted ones
  };
  PerClass classes[2];  // --critical-share: critical, sheddable; the loaded phase's arrivals
  const double loaded_from = phases[1].from_s, loaded_to = phases[1].from_s + phases[1].seconds;
  bool finished = false;
  std::atomic<int64_t> errors{0};
  const std::string lease_body = R"({"key":")" + o.key + R"(","policy":")" + o.policy + R"(")";
  const char* class_names[2] = {"critical", "sheddable"};
  const auto start = steady::now() + std::chrono::milliseconds(200);

  auto client = [&] {
    Http http(host, port);
    std::string body;
    for (;;) {
      steady::time_point t0;
      int klass;
      {
        absl::MutexLock lock(&mu);
        while (arrivals.empty() && !finished) arrived.Wait(&mu);
        if (arrivals.empty()) return;
        std::tie(t0, klass) = arrivals.front();
        arrivals.pop_front();
      }
      const double at_s = duration<double>(t0 - start).count();
      const size_t sec = std::min(per_second.size() - 1, static_cast<size_t>(at_s));
      PerClass* pc = klass >= 0 && at_s >= loaded_from && at_s < loaded_to ? &classes[klass] : nullptr;
      const int status = http.request(
          "POST", "/v1/leases",
          lease_body + (klass < 0 ? "}" : std::string(R"(,"priority":")") + class_names[klass] + "\"}"), body);
      const double waited = ms_since(t0, steady::now());
      if (status == 429) {
        absl::MutexLock lock(&mu);
        ++per_second[sec].refused;
        if (pc != nullptr) ++pc->offered, ++pc->refused;
        continue;
      }
      const std::string id = json_field(body, "lease_id");
      const int64_t limit = std::atoll(json_field(body, "limit").c_str());
      if (status != 200 || id.empty()) {
        ++errors;
        continue;
      }
      Backend::Job job;
      backend.call(job);
      const double latency = ms_since(t0, job.answered);
      const bool late = latency > o.timeout_ms;
      if (http.request("DELETE", "/v1/leases/" + id, late ? R"({"outcome":"timeout"})" : "", body) != 200) ++errors;
      absl::MutexLock lock(&mu);
      Second& s = per_second[sec];
      ++s.admitted;
      s.good += late ? 0 : 1;
      s.latencies.push_back(latency);
      s.limit_min = std::min(s.limit_min, limit);
      s.limit_max = std::max(s.limit_max, limit);
      s.limit_last = limit;
      if (pc != nullptr) {
        ++pc->offered;
        ++pc->admitted;
        pc->waits.push_back(waited);
      }
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < o.clients; ++i) clients.emplace_back(client);

  // The schedule: Poisson arrivals at each phase's rate; the backend resized at each phase.
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> draw(0, 1);
  double t = 0;
  for (const Phase& p : phases) {
    backend.resize(p.workers);
    std::exponential_distribution<double> gap(p.load * capacity);
    t = std::max(t, p.from_s);
    while ((t += gap(rng)) < p.from_s + p.seconds) {
      const auto at = start + std::chrono::duration_cast<steady::duration>(duration<double>(t));
      std::this_thread::sleep_until(at);
      const int klass = o.critical_share < 0 ? -1 : draw(rng) < o.critical_share ? 0 : 1;
      absl::MutexLock lock(&mu);
      arrivals.emplace_back(at, klass);
      arrived.Signal();
    }
  }
  {
    absl::MutexLock lock(&mu);
    finished = true;
    arrived.SignalAll();
  }
  for (auto& th : clients) th.join();

  // Per phase.
  std::printf("%d workers x %.0f ms (+-%.0f %%), capacity %.0f/s, clients wait %.0f ms; policy %s\n", o.workers,
              o.service_ms, o.jitter * 100, capacity, o.timeout_ms, o.policy.c_str());
  std::printf("%-9s %-7s %-5s %-7s %-10s %-9s %-9s %-9s %s\n", "phase", "seconds", "load", "workers", "goodput",
              "refused", "p50", "p99", "limit range");
  std::vector<double> p99s;
  std::vector<double> goodputs;
  for (const Phase& p : phases) {
    std::vector<double> lat;
    int64_t good = 0, admitted = 0, refused = 0, lo = INT64_MAX, hi = 0;
    for (int s = static_cast<int>(p.from_s); s < static_cast<int>(p.from_s + p.seconds); ++s) {
      const Second& x = per_second[static_cast<size_t>(s)];
      lat.insert(lat.end(), x.latencies.begin(), x.latencies.end());
      good += x.good;
      admitted += x.admitted;
      refused += x.refused;
      if (x.admitted > 0) lo = std::min(lo, x.limit_min), hi = std::max(hi, x.limit_max);
    }
    const double p50 = percentile(lat, 0.5), p99 = percentile(lat, 0.99);
    const double goodput = static_cast<double>(good) / p.seconds;
    const double decided = static_cast<double>(admitted + refused);
    p99s.push_back(p99);
    goodputs.push_back(goodput);
    char gp[32], rf[32], a[32], b[32];
    std::snprintf(gp, sizeof gp, "%.0f/s", goodput);
    std::snprintf(rf, sizeof rf, "%.0f %%", decided > 0 ? 100.0 * static_cast<double>(refused) / decided : 0.0);
    std::snprintf(a, sizeof a, "%.1f ms", p50);
    std::snprintf(b, sizeof b, "%.1f ms", p99);
    std::printf("%-9s %-7.0f %-5.1f %-7d %-10s %-9s %-9s %-9s %lld-%lld\n", p.name, p.seconds, p.load, p.workers, gp, rf,
                a, b, static_cast<long long>(lo == INT64_MAX ? 0 : lo), static_cast<long long>(hi));
  }
  if (o.critical_share >= 0) {
    std::printf("loaded phase by class: class offered admitted refused lease-answer p99 max\n");
    for (int c = 0; c < 2; ++c) {
      PerClass& x = classes[c];
      const double mx = x.waits.empty() ? 0 : *std::max_element(x.waits.begin(), x.waits.end());
      std::printf("  %-10s %lld %lld %lld %.1f ms %.1f ms\n", class_names[c], static_cast<long long>(x.offered),
                  static_cast<long long>(x.admitted), static_cast<long long>(x.refused), percentile(x.waits, 0.99), mx);
    }
  }
  const double ratio = p99s[0] > 0 ? p99s[1] / p99s[0] : 0;
  const double good_share = goodputs[1] / capacity;
  std::printf("loaded: p99 %.1f ms = %.2fx unloaded (%.1f ms); goodput %.0f %% of capacity\n", p99s[1], ratio, p99s[0],
              100 * good_share);

  // After the halving: where the limit settles and how long it took.
  double limit_follow_s = -1, p99_follow_s = -1;
  int64_t settled = 0;
  double settled_p99 = 0;
  if (phases.size() == 3) {
    const Phase& h = phases[2];
    const int from = static_cast<int>(h.from_s), to = static_cast<int>(h.from_s + h.seconds);
    std::vector<double> tail;
    for (int s = std::max(from, to - 5); s < to; ++s) tail.push_back(static_cast<double>(per_second[static_cast<size_t>(s)].limit_last));
    settled = static_cast<int64_t>(percentile(tail, 0.5));
    for (int s = to - 1; s >= from; --s) {  // the last second outside the band, + 1
      const auto& x = per_second[static_cast<size_t>(s)];
      const bool in = std::abs(static_cast<double>(x.limit_last - settled)) <= 0.1 * static_cast<double>(settled) + 1;
      if (!in) {
        limit_follow_s = s + 1 - from;
        break;
      }
      limit_follow_s = 0;
    }
    for (int s = to - 1; s >= from; --s) {
      auto lat = per_second[static_cast<size_t>(s)].latencies;
      if (percentile(lat, 0.99) > 2 * p99s[0]) {
        p99_follow_s = s + 1 == to ? -1 : s + 1 - from;  // -1: the last second too
        break;
      }
      p99_follow_s = 0;
    }
    std::vector<double> late;  // the phase's second half: where it settled
    for (int s = from + (to - from) / 2; s < to; ++s) {
      const auto& l = per_second[static_cast<size_t>(s)].latencies;
      late.insert(late.end(), l.begin(), l.end());
    }
    settled_p99 = percentile(late, 0.99);
    char follow[64] = "never within the phase";
    if (p99_follow_s >= 0 && p99_follow_s < to - from) std::snprintf(follow, sizeof follow, "%.0f s", p99_follow_s);
    std::printf("halved: the limit settles at %lld, within 10 %% of it %.0f s after the halving; p99 of the "
                "phase's second half %.1f ms = %.2fx unloaded; a second's p99 within 2x unloaded for good: %s\n",
                static_cast<long long>(settled), limit_follow_s, settled_p99, p99s[0] > 0 ? settled_p99 / p99s[0] : 0.0,
                follow);
  }
  if (o.json) {
    std::string traj;
    for (int s = 0; s < seconds; ++s) traj += (s ? "," : "") + std::to_string(per_second[static_cast<size_t>(s)].limit_last);
    std::printf("{\"policy\":\"%s\",\"unloaded_p99_ms\":%.3f,\"loaded_p99_ms\":%.3f,\"p99_ratio\":%.3f,"
                "\"goodput_share\":%.4f,\"halved_p99_ms\":%.3f,\"halved_settled_p99_ms\":%.3f,\"settled_limit\":%lld,\"limit_follow_s\":%.0f,"
                "\"p99_follow_s\":%.0f,\"errors\":%lld,\"critical_refused\":%lld,\"sheddable_refused\":%lld,"
                "\"critical_wait_p99_ms\":%.3f,\"limit_per_second\":[%s]}\n",
                o.policy.c_str(), p99s[0], p99s[1], ratio, good_share, p99s.size() > 2 ? p99s[2] : 0.0,
                settled_p99, static_cast<long long>(settled), limit_follow_s, p99_follow_s, static_cast<long long>(errors.load()),
                static_cast<long long>(classes[0].refused), static_cast<long long>(classes[1].refused),
                percentile(classes[0].waits, 0.99), traj.c_str());
  }
  if (errors.load() > 0) {
    std::fprintf(stderr, "ratelimit-bench adaptive: %lld requests failed (not 200/429, or a release refused)\n",
                 static_cast<long long>(errors.load()));
    return 1;
  }
  return 0;
}

}  // namespace ratelimit::bench
