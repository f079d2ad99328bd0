// capacity.cc — a backend with a capacity behind a concurrency limit (model and reasons in
// capacity.h): Poisson arrivals per phase, admission against the limit in force, a FIFO in front
// of `workers` servers, answers in time order; per phase goodput, refusals, round-trip
// percentiles and the limit's range.
#include "capacity.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <deque>
#include <queue>

#include "py_random.h"
#include "ratelimit/adaptive_limit.h"

namespace ratelimit::sim {
namespace {


int64_t us(double s) { return static_cast<int64_t>(std::llround(s * 1e6)); }

class Fixed final : public LimitSource {
 public:
  explicit Fixed(int64_t n) : n_(n) {}
  std::string name() const override { return "fixed " + std::to_string(n_); }
  int64_t limit() const override { return n_; }
  void sample(int64_t, int64_t, int64_t, bool) override {}

 private:
  int64_t n_;
};

// An estimator of src/core (adaptive_limit.h) fed every answer, windowed as the daemon does.
class Adaptive final : public LimitSource {
 public:
  explicit Adaptive(const adaptive::AdaptiveConfig& c) : c_(c), s_(adaptive::initial_state(c)) {}
  std::string name() const override { return std::string(adaptive::estimator_name(c_.estimator)); }
  int64_t limit() const override { return adaptive::limit(s_); }
  void sample(int64_t now_us, int64_t rtt_us, int64_t inflight, bool dropped) override {
    adaptive::update_at(c_, s_, {std::min(rtt_us, adaptive::kMaxSampleUs), inflight, dropped}, now_us);
  }

 private:
  adaptive::AdaptiveConfig c_;
  adaptive::AdaptiveState s_;
};

Status validate(const CapacityScenario& s) {
  if (s.workers < 1 || s.workers > 100'000) return Status::invalid_argument("capacity: workers must be 1 ... 100000");
  if (s.service < Micros{1} || s.service > Micros{3'600'000'000}) {
    return Status::invalid_argument("capacity: service time must be 1 us ... 1 h");
  }
  if (!(s.jitter >= 0) || s.jitter > 0.9) return Status::invalid_argument("capacity: jitter must be 0 ... 0.9");
  if (s.timeout <= Micros{0}) return Status::invalid_argument("capacity: timeout must be > 0");
  if (s.phases.empty() || s.phases.size() > 100) return Status::invalid_argument("capacity: 1 ... 100 phases");
  for (const CapacityPhase& p : s.phases) {
    if (!(p.duration_s > 0) || p.duration_s > 3600) return Status::invalid_argument("capacity: a phase lasts 0 ... 3600 s");
    if (!(p.load >= 0) || p.load > 100) return Status::invalid_argument("capacity: load must be 0 ... 100");
    if (p.workers < 0 || p.workers > 100'000) return Status::invalid_argument("capacity: workers must be 0 ... 100000");
  }
  if (s.classes.size() > algo::kMaxClasses || s.shares.size() != s.classes.size()) {
    return Status::invalid_argument("capacity: one share per class, at most 16 classes");
  }
  double total = 0;
  for (double share : s.shares) total += share >= 0 ? share : 2;
  if (!s.classes.empty() && std::abs(total - 1) > 1e-9) return Status::invalid_argument("capacity: class shares must sum to 1");
  if (s.max_wait < Micros{0}) return Status::invalid_argument("capacity: max_wait must be >= 0");
  return {};
}

struct Waiting {
  int64_t admitted_us;
  int64_t inflight;  // in flight when admitted, itself included (a lease's sample)
};

// A request of a class without headroom waiting at the limit (the daemon's waiting queue).
struct LimitWaiter {
  int64_t arrived_us;
  int64_t deadline_us;
};

struct Answer {
  int64_t done_us;
  int64_t admitted_us;
  int64_t inflight;
  bool operator>(const Answer& o) const { return done_us > o.done_us; }
};

int64_t quantile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

class Model {
 public:
  Model(const CapacityScenario& s, LimitSource& source)
      : s_(s), source_(source), rng_(s.seed), workers_(s.workers), waiters_(s.classes.size()) {}

  CapacityRun run() {
    CapacityRun r;
    r.limiter = source_.name();
    r.unloaded_p99_us = static_cast<int64_t>(static_cast<double>(s_.service.count()) * (1 + 0.98 * s_.jitter));
    const double capacity0 = static_cast<double>(s_.workers) * 1e6 / static_cast<double>(s_.service.count());
    int64_t start = 0;
    for (const CapacityPhase& p : s_.phases) {
      if (p.workers > 0) workers_ = p.workers;
      const int64_t end = start + us(p.duration_s);
      CapacityPhaseResult out;
      out.from_s = static_cast<double>(start) / 1e6;
      out.to_s = static_cast<double>(end) / 1e6;
      out.load = p.load;
      out.workers = workers_;
      out.capacity_rps = static_cast<double>(workers_) * 1e6 / static_cast<double>(s_.service.count());
      out.limit_min = out.limit_max = source_.limit();
      out.classes.assign(s_.classes.size(), {});
      waits_.assign(s_.classes.size(), {});
      phase_ = &out;
      rtts_.clear();
      good_ = 0;
      const double rate = p.load * capacity0;
      for (double t = static_cast<double>(start) + (rate > 0 ? rng_.expovariate(rate) * 1e6 : 1e300);
           t < static_cast<double>(end); t += rng_.expovariate(rate) * 1e6) {
        arrive(static_cast<int64_t>(t));
      }
      answer_until(end);
      out.goodput_rps = static_cast<double>(good_) / p.duration_s;
      out.p50_us = quantile(rtts_, 0.50);
      out.p99_us = quantile(rtts_, 0.99);
      for (size_t c = 0; c < s_.classes.size(); ++c) {
        out.classes[c].wait_p99_us = quantile(waits_[c], 0.99);
        for (int64_t w : waits_[c]) out.classes[c].wait_max_us = std::max(out.classes[c].wait_max_us, w);
      }
      r.phases.push_back(out);
      start = end;
    }
    return r;
  }

 private:
  // Answers everything done at or before t, starting queued requests as workers free up.
  void answer_until(int64_t t) {
    while (!serving_.empty() && serving_.top().done_us <= t) {
      const Answer a = serving_.top();
      serving_.pop();
      --in_flight_;
      const int64_t rtt = a.done_us - a.admitted_us;
      const bool dropped = rtt > s_.timeout.count();
      rtts_.push_back(rtt);
      if (!dropped) ++good_;
      source_.sample(a.done_us, rtt, a.inflight, dropped);
      note_limit();
      admit_waiters(a.done_us);
      start_queued(a.done_us);
    }
  }

  void start_queued(int64_t now) {
    while (!queue_.empty() && static_cast<int64_t>(serving_.size()) < workers_) {
      const Waiting w = queue_.front();
      queue_.pop_front();
      serving_.push({now + service_time(), w.admitted_us, w.inflight});
    }
  }

  int64_t service_time() {
    const double f = 1 + s_.jitter * (2 * rng_.random() - 1);
    return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(s_.service.count()) * f));
  }

  void arrive(int64_t t) {
    answer_until(t);
    expire_waiters(t);
    start_queued(t);  // workers added at a phase boundary take the queue first
    ++phase_->offered;
    if (s_.classes.empty()) {
      if (in_flight_ >= source_.limit()) {
        ++phase_->refused;
        return;
      }
      admit(t);
      return;
    }
    const size_t c = draw_class();
    ++phase_->classes[c].offered;
    const bool any_waiting = std::any_of(waiters_.begin(), waiters_.end(), [](const auto& q) { return !q.empty(); });
    if (!any_waiting && in_flight_ < algo::class_limit(source_.limit(), s_.classes[c].headroom)) {
      ++phase_->classes[c].admitted;
      waits_[c].push_back(0);
      admit(t);
      return;
    }
    if (s_.classes[c].headroom == 0 && s_.max_wait > Micros{0}) {  // joins the tail, as in the daemon
      ++phase_->classes[c].waited;
      waiters_[c].push_back({t, t + s_.max_wait.count()});
      return;
    }
    ++phase_->refused;
    ++phase_->classes[c].refused;
  }

  void admit(int64_t t) {
    ++phase_->admitted;
    ++in_flight_;
    queue_.push_back({t, in_flight_});
    start_queued(t);
  }

  size_t draw_class() {
    double u = rng_.random();
    for (size_t c = 0; c + 1 < s_.shares.size(); ++c) {
      if (u < s_.shares[c]) return c;
      u -= s_.shares[c];
    }
    return s_.shares.size() - 1;
  }

  // Waiters whose max_wait passed by `t` are refused (at their deadline).
  void expire_waiters(int64_t t) {
    for (size_t c = 0; c < waiters_.size(); ++c) {
      auto& q = waiters_[c];
      while (!q.empty() && q.front().deadline_us <= t) {
        q.pop_front();
        ++phase_->refused;
        ++phase_->classes[c].refused;
      }
    }
  }

  // A unit freed at `t`: waiters, by class weight (src/core's pick_class / charge_class), take it.
  void admit_waiters(int64_t t) {
    if (s_.classes.empty()) return;
    expire_waiters(t);
    const size_t n = s_.classes.size();
    while (in_flight_ < source_.limit()) {
      std::array<bool, algo::kMaxClasses> waiting{};
      for (size_t c = 0; c < n; ++c) waiting[c] = !waiters_[c].empty();
      const size_t c = algo::pick_class(s_.classes, {credits_.data(), n}, {waiting.data(), n});
      if (c == n) return;
      algo::charge_class(s_.classes, {credits_.data(), n}, {waiting.data(), n}, c);
      const LimitWaiter w = waiters_[c].front();
      waiters_[c].pop_front();
      ++phase_->classes[c].admitted;
      waits_[c].push_back(t - w.arrived_us);
      admit(t);
    }
  }

  void note_limit() {
    phase_->limit_min = std::min(phase_->limit_min, source_.limit());
    phase_->limit_max = std::max(phase_->limit_max, source_.limit());
  }

  const CapacityScenario& s_;
  LimitSource& source_;
  PyRandom rng_;
  int64_t workers_;
  int64_t in_flight_ = 0;
  std::deque<Waiting> queue_;  // requests admitted and waiting for a worker
  std::priority_queue<Answer, std::vector<Answer>, std::greater<>> serving_;
  CapacityPhaseResult* phase_ = nullptr;
  std::vector<int64_t> rtts_;
  int64_t good_ = 0;
  std::vector<std::deque<LimitWaiter>> waiters_;  // per class
  std::array<int64_t, algo::kMaxClasses> credits_{};
  std::vector<std::vector<int64_t>> waits_;  // per class: the phase's admitted requests' waits
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::unique_ptr<LimitSource> fixed_limit(int64_t limit) { return std::make_unique<Fixed>(limit); }

Result<std::unique_ptr<LimitSource>> adaptive_limit(const adaptive::AdaptiveConfig& config) {
  if (Status s = adaptive::validate(config); !s.is_ok()) return s;
  return std::unique_ptr<LimitSource>(std::make_unique<Adaptive>(config));
}

CapacityScenario capacity_load_steps() {
  CapacityScenario s;
  s.phases = {{10, 0.5, 0}, {10, 0.9, 0}, {10, 2.0, 0}, {10, 1.0, 0}};
  return s;
}

CapacityScenario capacity_classes_at_2x() {
  CapacityScenario s;
  s.phases = {{20, 2.0, 0}};
  s.classes = {{"critical", 1, 0}, {"sheddable", 1, 0.5}};
  s.shares = {0.5, 0.5};
  s.max_wait = Micros{1'000'000};
  return s;
}

CapacityScenario capacity_halved_at_3x() {
  CapacityScenario s;
  s.phases = {{10, 3.0, 0}, {10, 3.0, 10}};
  return s;
}

Result<CapacityRun> run_capacity(const CapacityScenario& scenario, LimitSource& source) {
  if (Status s = validate(scenario); !s.is_ok()) return s;
  if (source.limit() < 1) return Status::invalid_argument("capacity: the limit must be at least 1");
  return Model(scenario, source).run();
}

std::string render_capacity(const CapacityScenario& s, const std::vector<CapacityRun>& runs) {
  std::string out = std::to_string(s.workers) + " workers x " + fmt("%g ms", static_cast<double>(s.service.count()) / 1e3) +
                    " (+-" + fmt("%g", 100 * s.jitter) + " %), clients wait " +
                    fmt("%g s", static_cast<double>(s.timeout.count()) / 1e6) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-9s %-5s %-7s %-9s %-10s %-8s %-9s %-9s %s\n", "limit", "phase", "load",
                "workers", "goodput", "capacity", "refused", "p50", "p99", "limit range");
  out += line;
  for (const CapacityRun& r : runs) {
    for (size_t k = 0; k < r.phases.size(); ++k) {
      const CapacityPhaseResult& p = r.phases[k];
      const std::string phase = fmt("%g", p.from_s) + "-" + fmt("%gs", p.to_s);
      const std::string refused = p.offered > 0 ? fmt("%.0f %%", 100.0 * static_cast<double>(p.refused) / static_cast<double>(p.offered)) : "-";
      std::snprintf(line, sizeof line, "%-12s %-9s %-5s %-7lld %-9s %-10s %-8s %-9s %-9s %lld-%lld\n",
                    k == 0 ? r.limiter.c_str() : "", phase.c_str(), fmt("%gx", p.load).c_str(),
                    static_cast<long long>(p.workers), fmt("%.0f/s", p.goodput_rps).c_str(),
                    fmt("%.0f/s", p.capacity_rps).c_str(), refused.c_str(),
                    fmt("%.1f ms", static_cast<double>(p.p50_us) / 1e3).c_str(),
                    fmt("%.1f ms", static_cast<double>(p.p99_us) / 1e3).c_str(), static_cast<long long>(p.limit_min),
                    static_cast<long long>(p.limit_max));
      out += line;
    }
  }
  if (s.classes.empty()) return out;
  std::snprintf(line, sizeof line, "%-12s %-9s %-10s %-9s %-9s %-9s %-8s %-10s %s\n", "limit", "phase", "class", "offered",
                "admitted", "refused", "waited", "wait p99", "wait max");
  out += line;
  for (const CapacityRun& r : runs) {
    for (size_t k = 0; k < r.phases.size(); ++k) {
      const CapacityPhaseResult& p = r.phases[k];
      for (size_t c = 0; c < p.classes.size(); ++c) {
        const auto& x = p.classes[c];
        const std::string phase = fmt("%g", p.from_s) + "-" + fmt("%gs", p.to_s);
        std::snprintf(line, sizeof line, "%-12s %-9s %-10s %-9lld %-9lld %-9lld %-8lld %-10s %s\n",
                      k == 0 && c == 0 ? r.limiter.c_str() : "", c == 0 ? phase.c_str() : "", s.classes[c].name.c_str(),
                      static_cast<long long>(x.offered), static_cast<long long>(x.admitted),
                      static_cast<long long>(x.refused), static_cast<long long>(x.waited),
                      fmt("%.1f ms", static_cast<double>(x.wait_p99_us) / 1e3).c_str(),
                      fmt("%.1f ms", static_cast<double>(x.wait_max_us) / 1e3).c_str());
        out += line;
      }
    }
  }
  return out;
}

}  // namespace ratelimit::sim
