// throttle.cc — the event-driven throttling engine (see throttle.h): one Lane per algorithm,
// each with its own per-key state, queue and event heap, fed the same requests.
#include "throttle.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <queue>
#include <unordered_map>

#include "ratelimit/algorithms.h"
#include "ratelimit/waiting_rule.h"

namespace ratelimit::sim {
namespace {

// At one instant: releases first (a freed slot goes to the queue), then wake-ups, then
// deadlines (a waiter decided at its deadline is still served).
enum EventKind : uint8_t { kEnd = 0, kWake = 1, kDeadline = 2 };

struct Event {
  int64_t t = 0;
  uint8_t kind = kEnd;
  uint64_t seq = 0;
  uint32_t key = 0;
  uint64_t lease = 0;  // kEnd of a concurrency lane: the lease to release
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

struct Waiter {
  int64_t arrival = 0;
  int64_t deadline = 0;
  int64_t cost = 1;
  int64_t duration = 0;
};

// The simulator's lease ids: a counter in the id's first 8 bytes (deterministic runs; never 0).
LeaseId lease_id(uint64_t n) {
  LeaseId id;
  for (size_t i = 0; i < 8; ++i) id.bytes[i] = static_cast<uint8_t>(n >> (56 - 8 * i));
  return id;
}

struct KeyLane {
  algo::AlgorithmState rate;
  algo::ConcurrencyState leases;
  std::deque<Waiter> queue;
  int64_t wake_at = -1;  // a pending wake-up for the queue's head
  int64_t in_flight = 0;
  int64_t last_retry_at = 0;  // when the last denial on the key said it could pass
};

class Lane {
 public:
  // `concurrency`: a concurrency lane (core's algorithm, Policy::concurrency) when `rate` is empty.
  Lane(std::optional<Policy> rate, std::optional<Policy> concurrency, const ThrottleOptions& o, ThrottleResult r)
      : rate_(std::move(rate)), concurrency_(std::move(concurrency)), o_(o), r_(std::move(r)) {
    if (rate_) initial = algo::fresh_state(*rate_);
  }

  void advance(int64_t t) {
    while (!events_.empty() && events_.top().t <= t) {
      const Event e = events_.top();
      events_.pop();
      KeyLane& k = keys_[e.key];
      if (e.kind == kEnd) {
        --k.in_flight;
        --in_flight_;
        if (!rate_) algo::decide(*concurrency_, k.leases, e.t, 1, algo::Op::kRelease, lease_id(e.lease));
        serve(e.key, e.t);
      } else if (e.kind == kWake) {
        if (k.wake_at == e.t) {
          k.wake_at = -1;
          serve(e.key, e.t);
        }
      } else {
        // Waiters whose deadline has come leave the queue, refused; the others keep order.
        const auto before = k.queue.size();
        std::erase_if(k.queue, [&](const Waiter& w) { return w.deadline <= e.t; });
        r_.refused_timed_out += static_cast<int64_t>(before - k.queue.size());
        if (before != k.queue.size()) serve(e.key, e.t);
      }
    }
  }

  void arrive(int64_t t, uint32_t key, int64_t cost, int64_t duration) {
    while (keys_.size() <= key) keys_.push_back(KeyLane{initial, {}, {}, -1, 0});
    KeyLane& k = keys_[key];
    ++r_.offered;
    const Waiter w{t, t + o_.max_wait.count(), cost, duration};
    const bool waiting = o_.max_wait.count() > 0;
    if (!k.queue.empty()) {  // FIFO: behind the waiters, never past them
      enqueue(key, k, w);
      return;
    }
    uint64_t lease = 0;
    const Decision d = decide(k, t, cost, lease);
    if (d.allowed) {
      admit(key, k, t, w, lease, false);
      return;
    }
    // The daemon's waiting rule (algo::worth_waiting, as src/service/waiting.cc decides).
    if (!waiting || !algo::waitable(d)) {
      ++r_.refused;
      return;
    }
    if (!algo::worth_waiting(d, !rate_, t, w.deadline)) {
      ++r_.refused_timed_out;  // a rate policy knows now that no wait within max_wait helps
      return;
    }
    if (enqueue(key, k, w)) schedule_wake(key, k, t, d.retry_after.count());
  }

  ThrottleResult finish() {
    advance(INT64_MAX);
    std::sort(waits_.begin(), waits_.end());
    if (!waits_.empty()) {
      auto at = [&](double q) {
        return waits_[std::min(waits_.size() - 1, static_cast<size_t>(q * static_cast<double>(waits_.size())))];
      };
      r_.wait_p50_us = at(0.5);
      r_.wait_p99_us = at(0.99);
      r_.wait_max_us = waits_.back();
    }
    const int64_t admitted = r_.admitted_at_once + r_.admitted_after_wait;
    r_.wait_mean_us = admitted > 0 ? wait_sum_ / admitted : 0;
    return r_;
  }

 private:
  // The lane's decision (a concurrency lane's admission takes lease `lease`); a waitable denial
  // is remembered as the key's last (the daemon's queue keeps it to time its next wake-up).
  Decision decide(KeyLane& k, int64_t now, int64_t cost, uint64_t& lease) {
    Decision d;
    if (rate_) {
      d = algo::decide(*rate_, k.rate, now, cost, algo::Op::kAcquire);
    } else {
      lease = ++next_lease_;
      d = algo::decide(*concurrency_, k.leases, now, cost, algo::Op::kAcquire, lease_id(lease));
    }
    if (algo::waitable(d)) k.last_retry_at = now + d.retry_after.count();
    return d;
  }

  bool enqueue(uint32_t key, KeyLane& k, const Waiter& w) {
    if (o_.max_wait.count() <= 0) {
      ++r_.refused;
      return false;
    }
    if (static_cast<int64_t>(k.queue.size()) >= o_.max_queue) {
      ++r_.refused_queue_full;
      return false;
    }
    k.queue.push_back(w);
    r_.peak_queue = std::max(r_.peak_queue, static_cast<int64_t>(k.queue.size()));
    events_.push(Event{w.deadline, kDeadline, ++seq_, key, 0});
    return true;
  }

  void schedule_wake(uint32_t key, KeyLane& k, int64_t now, int64_t retry) {
    k.wake_at = now + retry;
    events_.push(Event{k.wake_at, kWake, ++seq_, key, 0});
  }

  // Decides the queue's head again, and the next ones while the daemon would (the rules of
  // src/core/waiting_rule.cc, as src/service/waiting_loop.cc applies them).
  void serve(uint32_t key, int64_t now) {
    KeyLane& k = keys_[key];
    while (!k.queue.empty()) {
      const Waiter w = k.queue.front();
      uint64_t lease = 0;
      const Decision d = decide(k, now, w.cost, lease);
      if (d.allowed) {
        k.queue.pop_front();
        admit(key, k, now, w, lease, true);
        // No room for the next waiter: it is decided at the last denial's retry time.
        if (!k.queue.empty() && !algo::next_decided_at_once(d, !rate_, k.queue.front().cost)) {
          schedule_wake(key, k, now, std::max<int64_t>(0, k.last_retry_at - now));
          return;
        }
        continue;
      }
      if (rate_ && !algo::worth_waiting(d, false, now, w.deadline)) {
        k.queue.pop_front();
        ++r_.refused_timed_out;
        continue;
      }
      const int64_t retry = d.retry_after.count();
      if (algo::waitable(d) && (rate_ || now + retry <= w.deadline)) {
        if (k.wake_at < 0 || k.wake_at > now + retry) schedule_wake(key, k, now, retry);
      }
      return;
    }
  }

  void admit(uint32_t key, KeyLane& k, int64_t now, const Waiter& w, uint64_t lease, bool waited) {
    const int64_t wait = now - w.arrival;
    if (waited) {
      ++r_.admitted_after_wait;
      waits_.push_back(wait);
    } else {
      ++r_.admitted_at_once;
    }
    wait_sum_ += wait;
    ++k.in_flight;
    ++in_flight_;
    r_.peak_in_flight = std::max(r_.peak_in_flight, in_flight_);
    r_.peak_in_flight_per_key = std::max(r_.peak_in_flight_per_key, k.in_flight);
    events_.push(Event{now + w.duration, kEnd, ++seq_, key, lease});
  }


 public:
  // A new key's state (the replay's: a token bucket may start with the run's --token-fill).
  algo::AlgorithmState initial;

 private:
  std::optional<Policy> rate_;
  std::optional<Policy> concurrency_;
  const ThrottleOptions& o_;
  ThrottleResult r_;
  std::vector<KeyLane> keys_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::vector<int64_t> waits_;
  int64_t wait_sum_ = 0;
  int64_t in_flight_ = 0;
  uint64_t seq_ = 0;
  uint64_t next_lease_ = 0;
};

}  // namespace

Status validate(const ThrottleOptions& o) {
  if (o.concurrency && (*o.concurrency < 1 || *o.concurrency > kMaxLimit)) {
    return Status::invalid_argument("--concurrency must be 1 ... " + std::to_string(kMaxLimit));
  }
  if (o.lease_ttl.count() <= 0) return Status::invalid_argument("--lease-ttl must be positive");
  if (o.concurrency) {  // the lane decides with core's concurrency policy: its bounds apply
    auto p = Policy::concurrency(*o.concurrency, o.lease_ttl);
    if (!p) return Status::invalid_argument("--concurrency / --lease-ttl: " + p.status().message());
  }
  if (o.hold.count() < 0) return Status::invalid_argument("--hold must not be negative");
  if (o.max_wait.count() < 0) return Status::invalid_argument("--max-wait must not be negative");
  if (o.max_queue < 0) return Status::invalid_argument("--max-queue must not be negative");
  return {};
}

struct Throttle::Impl {
  ThrottleOptions options;
  std::vector<Lane> lanes;
  std::unordered_map<std::string, uint32_t> ids;
  int64_t from_trace = 0;
  bool started = false;
};

Throttle::Throttle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Throttle::Throttle(Throttle&&) noexcept = default;
Throttle& Throttle::operator=(Throttle&&) noexcept = default;
Throttle::~Throttle() = default;

Result<Throttle> Throttle::create(const std::array<Policy, kAlgorithms>& policies,
                                  ThrottleOptions options) {
  if (auto s = validate(options); !s.is_ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.token_policy = policies[3];
  impl->lanes.reserve(kAlgorithms + 1);
  for (const Policy& p : policies) {
    ThrottleResult r;
    r.algorithm = algorithm_name(p.algorithm());
    r.policy = describe_policy(p);
    impl->lanes.emplace_back(p, std::nullopt, impl->options, std::move(r));
  }
  if (options.concurrency) {
    ThrottleResult r;
    r.algorithm = "concurrency";
    r.policy = std::to_string(*options.concurrency) + " in flight";
    impl->lanes.emplace_back(std::nullopt, *Policy::concurrency(*options.concurrency, options.lease_ttl), impl->options,
                             std::move(r));
  }
  return Throttle(std::move(impl));
}

void Throttle::add(int64_t t_us, std::string_view key, int64_t cost, int64_t duration_us) {
  Impl& m = *impl_;
  if (!m.started) {
    m.started = true;
    // As the replay: every key's token bucket holds token_fill at the run's start.
    if (m.options.token_fill) {
      const Policy& token = m.options.token_policy;
      const int64_t taken = token.limit() * algo::kUnit -
                            std::llround(*m.options.token_fill * static_cast<double>(algo::kUnit));
      m.lanes[3].initial = algo::TokenBucketState{taken, std::min(m.options.start_us.value_or(t_us), t_us)};
    }
  }
  auto it = m.ids.find(std::string(key));
  if (it == m.ids.end()) it = m.ids.emplace(std::string(key), static_cast<uint32_t>(m.ids.size())).first;
  if (duration_us >= 0) ++m.from_trace;
  const int64_t d = duration_us >= 0 ? duration_us : m.options.hold.count();
  for (Lane& lane : m.lanes) {
    lane.advance(t_us);
    lane.arrive(t_us, it->second, cost, d);
  }
}

ThrottleReport Throttle::finish() {
  ThrottleReport out;
  out.options = impl_->options;
  out.durations_from_trace = impl_->from_trace;
  for (Lane& lane : impl_->lanes) out.results.push_back(lane.finish());
  return out;
}

}  // namespace ratelimit::sim
