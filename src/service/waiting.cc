// waiting.cc — the waiting service (see waiting.h): per-key FIFOs of denied requests, woken by
// releases and by the retry time the store computed, never by polling the store.
//
// Threads. A request first tries the fast path on its own thread (no waiter on its key's shard:
// straight to the decision service). Everything else — queues, timers, re-decisions, answers to
// waiters — runs on the one waiting thread (Loop), so queue state needs no lock.
// The lost wake-up. A request denied by the store travels to the waiting thread before it is
// queued; a release in that gap must not be missed. The releaser bumps epoch_[shard] and then
// reads queued_[shard]; the waiting thread bumps queued_[shard] and then reads epoch_[shard]
// (both sequentially consistent), so at least one of them sees the other: either the release
// posts a wake-up to a queue that now holds the waiter, or the enqueue sees a newer epoch than
// the one read before the decision and re-decides at once. A wake-up for a queue whose head is
// being decided is remembered (Queue::woken) and served when that decision returns.
// Store calls per waiter: its first decision (the one any request makes), then one per wake-up
// of its queue while it is the head. After an admission, the next head is tried at once only
// if the decision says capacity is left (concurrency: remaining >= its cost; a rate policy:
// remaining > 0), else at the next wake-up.
#include "waiting.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "mutex.h"

namespace ratelimit::service {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Event;
using Events = std::multimap<Clock::time_point, Event>;

struct Event {
  enum class Kind : uint8_t { kDeadline, kRetry, kHold };
  Kind kind;
  Waiter* waiter;    // kDeadline, kHold
  std::string qkey;  // kRetry
};

// The waiting service's side of one front-end Pending (Pending::waiter_), reused by the next
// request of the same front-end. Fields other than `generation` are written by the request's
// thread before the waiter is handed to the waiting thread, and by the waiting thread after.
struct Waiter final : Pending {
  enum class Phase : uint8_t { kFirst, kQueued, kDeciding, kHeld, kDone };

  WaitingService* svc = nullptr;
  Pending* outer = nullptr;
  std::atomic<uint64_t> generation{0};
  const Snapshot* snapshot = nullptr;
  Item item;
  std::string qkey;  // policy name, NUL, key
  size_t shard = 0;
  uint64_t epoch0 = 0;
  bool may_wait = false;
  Clock::time_point deadline{};
  Phase phase = Phase::kDone;
  bool cancel_requested = false;
  bool expired = false;  // its deadline passed while its decision was in flight
  Decision last{};       // the latest denial it waited on
  Clock::time_point last_at{};
  bool has_last = false;
  Events::iterator event{};  // its deadline or hold event
  bool has_event = false;

  Waiter() { defer_counting_ = true; }
  void resume() override;
};

void WaiterDeleter::operator()(Waiter* w) const { delete w; }

namespace {

// A lease taken by a decision whose client had gone: released at once, owning what it needs.
struct Compensation final : Pending {
  explicit Compensation(const Rule& r) : rule(r) {}
  Rule rule;
  std::string key;
  Item item;
  static inline const Snapshot kNoShadow{};
  void resume() override { delete this; }
};

bool retryable(const Decision& d) {
  return !d.allowed && d.reason == DecisionReason::kOverLimit && d.retry_after > Micros{0};
}

// `d` as seen `elapsed` after it was decided.
Decision aged(Decision d, Clock::duration elapsed) {
  const Micros e = std::chrono::duration_cast<Micros>(elapsed);
  d.retry_after = std::max(Micros{1}, d.retry_after - e);
  d.reset_after = std::max(Micros{0}, d.reset_after - e);
  return d;
}

}  // namespace

class WaitingService::Loop {
 public:
  struct Queue {
    std::deque<Waiter*> waiters;
    bool deciding = false;
    bool woken = false;
    Events::iterator retry{};
    bool has_retry = false;
    Decision last{};  // the latest denial on this key, for requests that never saw one
    Clock::time_point last_at{};
    bool has_last = false;
  };

  explicit Loop(WaitingService& svc) : svc_(svc), timer_(io_) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Loop() {
    work_.reset();
    asio::post(io_, [this] {
      stopping_ = true;
      timer_.cancel();
    });
    thread_.join();
  }

  template <typename F>
  void post(F f) {
    asio::post(io_, std::move(f));
  }

  // --- entry points, on the waiting thread ---------------------------------------------------

  // A request to queue: denied by the store (`decided`), or arriving while its key's shard had
  // waiters (not decided yet).
  void enqueue(Waiter* w, bool decided) {
    const Clock::time_point now = Clock::now();
    if (svc_.stopped_.load()) {
      if (decided) return answer_denied(w, now, &Counters::shutdown);
      w->may_wait = false;  // shut down: decided once, without waiting
      w->phase = Waiter::Phase::kFirst;
      if (svc_.decisions_.decide(*w->snapshot, {&w->item, 1}, Atomicity::kIndependent, *w)) on_decided(w);
      return;
    }
    Queue& q = queues_[w->qkey];
    if (decided) {
      q.last = w->last;
      q.last_at = w->last_at;
      q.has_last = true;
    }
    if (static_cast<int64_t>(q.waiters.size()) >= w->item.rule->max_queue) {
      if (!decided && q.has_last) {
        w->last = q.last;
        w->last_at = q.last_at;
        w->has_last = true;
      }
      answer_denied(w, now, &Counters::queue_full);
      return;
    }
    q.waiters.push_back(w);
    w->phase = Waiter::Phase::kQueued;
    svc_.queued_[w->shard].fetch_add(1);
    ++st_.waited;
    ++st_.waiting;
    w->event = events_.emplace(w->deadline, Event{Event::Kind::kDeadline, w, {}});
    w->has_event = true;
    rearm();
    // A release since its decision (see top), or a lone request never decided: decide the
    // head now; a lone denied one waits for a release or its retry time.
    const bool released_since = decided && svc_.epoch_[w->shard].load() != w->epoch0;
    if (released_since || (q.waiters.size() == 1 && !decided)) {
      kick(q);
    } else if (q.waiters.size() == 1) {
      arm_retry(q, w->qkey, w->last_at + w->last.retry_after);
    }
  }

  // A release freed a lease of `qkey` (this process): try its head.
  void wake(const std::string& qkey) {
    auto it = queues_.find(qkey);
    if (it != queues_.end()) kick(it->second);
  }

  void cancel(Waiter* w, uint64_t generation) {
    if (w->generation.load() != generation) return;
    switch (w->phase) {
      case Waiter::Phase::kQueued: {
        const std::string qkey = w->qkey;  // w may be reused once answered
        Queue& q = queues_.at(qkey);
        remove(q, w);
        ++st_.cancelled;
        answer_gone(w);
        after_change(q, qkey, false);
        return;
      }
      case Waiter::Phase::kHeld:
        drop_event(w);
        ++st_.cancelled;
        answer_gone(w);
        return;
      case Waiter::Phase::kFirst:
      case Waiter::Phase::kDeciding:
        w->cancel_requested = true;  // answered when its decision returns
        return;
      case Waiter::Phase::kDone:
        return;
    }
  }

  void shutdown() {
    const Clock::time_point now = Clock::now();
    std::vector<Waiter*> all;
    for (auto& [key, q] : queues_) {
      for (Waiter* w : q.waiters) {
        if (w->phase == Waiter::Phase::kQueued) all.push_back(w);
        else w->expired = true;  // deciding: answered when its decision returns
      }
    }
    for (Waiter* w : all) {
      Queue& q = queues_.at(w->qkey);
      if (!w->has_last && q.has_last) {
        w->last = q.last;
        w->last_at = q.last_at;
        w->has_last = true;
      }
      const std::string qkey = w->qkey;
      remove(q, w);
      answer_denied(w, now, &Counters::shutdown);
      drop_if_idle(qkey);
    }
    std::vector<Waiter*> held;
    for (auto& [at, e] : events_) {
      if (e.kind == Event::Kind::kHold) held.push_back(e.waiter);
    }
    for (Waiter* w : held) {
      drop_event(w);
      w->decisions.front().delay = std::chrono::duration_cast<Micros>(std::max(Clock::duration{0}, w->deadline - now));
      answer(w);
    }
  }

  // A decision of `w` returned (inline, or posted by Waiter::resume).
  void on_decided(Waiter* w) {
    const Clock::time_point now = Clock::now();
    if (w->phase == Waiter::Phase::kFirst) return first_decided(w, now);
    // Nothing of w is read once it is answered: its front-end may reuse it at once.
    const std::string qkey = w->qkey;
    const bool concurrency = w->item.rule->policy.is_concurrency();
    Queue& q = queues_.at(qkey);
    q.deciding = false;
    const bool ok = w->status.is_ok();
    const Decision d = ok ? w->decisions.front() : Decision{};
    if (w->cancel_requested) {
      remove(q, w);
      if (ok && d.allowed) compensate(w, d);
      ++st_.cancelled;
      answer_gone(w);
      after_change(q, qkey, false);  // a lease it took is released: that release wakes the key
      return;
    }
    if (ok && d.allowed) {
      remove(q, w);
      ++st_.admitted;
      admitted(w, now);
      const bool room = q.waiters.empty() ? false
                        : concurrency                  ? d.remaining >= q.waiters.front()->item.cost
                                                       : d.remaining > 0;
      after_change(q, qkey, room);
      return;
    }
    const bool can_wait = ok && retryable(d) && !w->expired && now < w->deadline && !svc_.stopped_.load() &&
                          (concurrency || now + d.retry_after <= w->deadline);
    if (ok && retryable(d)) {
      w->last = q.last = d;
      w->last_at = q.last_at = now;
      w->has_last = q.has_last = true;
    }
    if (can_wait) {
      w->phase = Waiter::Phase::kQueued;
      if (q.woken) {
        q.woken = false;
        post_kick(qkey);
      } else {
        arm_retry(q, qkey, now + d.retry_after);
      }
      return;
    }
    remove(q, w);
    if (ok && retryable(d)) {
      answer_denied(w, now, svc_.stopped_.load() ? &Counters::shutdown : &Counters::timed_out);
    } else {
      answer(w);  // a store error, a cost above the capacity, a failed-closed store
    }
    if (!q.waiters.empty() && ok && retryable(d)) arm_retry(q, qkey, now + d.retry_after);
    after_change(q, qkey, false);
  }

  // An admitted waiter's answer, held for its shaping delay when its rule says so.
  void admitted(Waiter* w, Clock::time_point now) {
    const Decision& d = w->decisions.front();
    if (w->item.rule->hold_delay && d.delay > Micros{0} && !svc_.stopped_.load() && !w->cancel_requested) {
      w->phase = Waiter::Phase::kHeld;
      w->deadline = now + d.delay;
      w->event = events_.emplace(w->deadline, Event{Event::Kind::kHold, w, {}});
      w->has_event = true;
      ++st_.held;
      rearm();
      return;
    }
    answer(w);
  }

  WaitStats stats() const {
    WaitStats s;
    s.waited = st_.waited.load();
    s.admitted = st_.admitted.load();
    s.timed_out = st_.timed_out.load();
    s.queue_full = st_.queue_full.load();
    s.cancelled = st_.cancelled.load();
    s.shutdown = st_.shutdown.load();
    s.held = st_.held.load();
    s.wakeups = st_.wakeups.load();
    s.waiting = st_.waiting.load();
    return s;
  }

 private:
  // WaitStats as counters any thread may read.
  struct Counters {
    std::atomic<uint64_t> waited{0}, admitted{0}, timed_out{0}, queue_full{0}, cancelled{0}, shutdown{0}, held{0},
        wakeups{0};
    std::atomic<int64_t> waiting{0};
  };
  using Why = std::atomic<uint64_t> Counters::*;

  // The async result of a request's first decision (the fast path).
  void first_decided(Waiter* w, Clock::time_point now) {
    const bool ok = w->status.is_ok();
    const Decision d = ok ? w->decisions.front() : Decision{};
    if (w->cancel_requested) {
      if (ok && d.allowed) compensate(w, d);
      ++st_.cancelled;
      return answer_gone(w);
    }
    if (ok && d.allowed) return admitted(w, now);
    if (!w->may_wait || !ok || !retryable(d) || svc_.stopped_.load() ||
        (!w->item.rule->policy.is_concurrency() && now + d.retry_after > w->deadline)) {
      return answer(w);
    }
    w->last = d;
    w->last_at = now;
    w->has_last = true;
    enqueue(w, true);
  }

  void kick(Queue& q) {
    if (q.deciding) {
      q.woken = true;
      return;
    }
    if (q.waiters.empty() || svc_.stopped_.load()) return;
    q.woken = false;
    if (q.has_retry) {
      events_.erase(q.retry);
      q.has_retry = false;
    }
    Waiter* w = q.waiters.front();
    q.deciding = true;
    w->phase = Waiter::Phase::kDeciding;
    ++st_.wakeups;
    if (svc_.decisions_.decide(*w->snapshot, {&w->item, 1}, Atomicity::kIndependent, *w)) on_decided(w);
  }
  // Decides the head of `qkey` later on this thread (no recursion through inline stores).
  void post_kick(const std::string& qkey) {
    post([this, qkey] { wake(qkey); });
  }

  // After a waiter left `q`: try the next head now (`now_too`), or at a release or retry time
  // already armed; forget the queue when empty.
  void after_change(Queue& q, const std::string& qkey, bool now_too) {
    if (!q.waiters.empty() && (now_too || q.woken)) {
      q.woken = false;
      post_kick(qkey);
      return;
    }
    if (!q.waiters.empty() && !q.has_retry && !q.deciding && q.has_last) {
      arm_retry(q, qkey, q.last_at + q.last.retry_after);  // never leave a head without a wake-up
    }
    drop_if_idle(qkey);
  }

  void drop_if_idle(const std::string& qkey) {
    auto it = queues_.find(qkey);
    if (it == queues_.end() || !it->second.waiters.empty() || it->second.deciding) return;
    if (it->second.has_retry) events_.erase(it->second.retry);
    queues_.erase(it);
  }

  void remove(Queue& q, Waiter* w) {
    for (auto it = q.waiters.begin(); it != q.waiters.end(); ++it) {
      if (*it == w) {
        q.waiters.erase(it);
        svc_.queued_[w->shard].fetch_sub(1);
        --st_.waiting;
        break;
      }
    }
    drop_event(w);
  }

  void drop_event(Waiter* w) {
    if (w->has_event) events_.erase(w->event);
    w->has_event = false;
  }

  void arm_retry(Queue& q, const std::string& qkey, Clock::time_point at) {
    if (q.has_retry) events_.erase(q.retry);
    q.retry = events_.emplace(at, Event{Event::Kind::kRetry, nullptr, qkey});
    q.has_retry = true;
    rearm();
  }

  void rearm() {
    if (events_.empty()) return;
    const Clock::time_point first = events_.begin()->first;
    if (armed_ && armed_at_ <= first) return;
    armed_ = true;
    armed_at_ = first;
    timer_.expires_at(first);
    // A wait replaced by an earlier one (expires_at above) or stopped ends aborted: only the
    // current wait may clear armed_ and fire.
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec == asio::error::operation_aborted || stopping_) return;
      armed_ = false;
      fire();
    });
  }

  void fire() {
    const Clock::time_point now = Clock::now();
    while (!events_.empty() && events_.begin()->first <= now) {
      Event e = std::move(events_.begin()->second);
      events_.erase(events_.begin());
      switch (e.kind) {
        case Event::Kind::kDeadline: {
          Waiter* w = e.waiter;
          w->has_event = false;
          if (w->phase == Waiter::Phase::kDeciding) {
            w->expired = true;
          } else if (w->phase == Waiter::Phase::kQueued) {
            Queue& q = queues_.at(w->qkey);
            if (!w->has_last && q.has_last) {
              w->last = q.last;
              w->last_at = q.last_at;
              w->has_last = true;
            }
            const std::string qkey = w->qkey;
            remove(q, w);
            answer_denied(w, now, &Counters::timed_out);
            after_change(q, qkey, false);
          }
          break;
        }
        case Event::Kind::kRetry: {
          auto it = queues_.find(e.qkey);
          if (it == queues_.end()) break;
          it->second.has_retry = false;
          kick(it->second);
          break;
        }
        case Event::Kind::kHold: {
          Waiter* w = e.waiter;
          w->has_event = false;
          w->decisions.front().delay = Micros{0};  // held: the caller may go now
          answer(w);
          break;
        }
      }
    }
    rearm();
  }

  // Completes the front-end's Pending with the waiter's answer, counting its outcome once.
  void answer(Waiter* w) {
    Pending& o = *w->outer;
    o.status = w->status;
    o.decisions = w->decisions;
    o.shadow_denied = w->shadow_denied;
    if (o.status.is_ok()) w->item.rule->counters->count(outcome_of(o.decisions.front(), false));
    w->phase = Waiter::Phase::kDone;
    o.resume();
  }

  // A 429 for a waiter not admitted: the denial it (or its key) last saw, aged to now.
  void answer_denied(Waiter* w, Clock::time_point now, Why why) {
    ++(st_.*why);
    Decision d;
    if (w->has_last) {
      d = aged(w->last, now - w->last_at);
    } else {  // never decided (its queue was full or shut down before any decision)
      d.limit = w->item.policy != nullptr ? w->item.policy->limit() : w->item.rule->policy.limit();
      d.retry_after = std::chrono::duration_cast<Micros>(std::chrono::seconds(1));
    }
    w->status = Status();
    w->decisions.assign(1, d);
    w->shadow_denied.assign(1, 0);
    answer(w);
  }

  // The client went away: nothing is counted; the answer is never sent.
  void answer_gone(Waiter* w) {
    w->status = Status::unavailable("the client went away while waiting");
    w->decisions.clear();
    Pending& o = *w->outer;
    o.status = w->status;
    o.decisions.clear();
    o.shadow_denied.clear();
    w->phase = Waiter::Phase::kDone;
    o.resume();
  }

  void compensate(Waiter* w, const Decision& d) {
    if (d.lease.empty() || svc_.stopped_.load()) return;  // a rate unit cannot be given back
    auto* c = new Compensation(*w->item.rule);
    c->key.assign(w->item.key);
    c->item = Item{&c->rule, c->key, 1, StoreOp::Kind::kRelease, nullptr, d.lease};
    if (svc_.decisions_.decide(Compensation::kNoShadow, {&c->item, 1}, Atomicity::kIndependent, *c)) delete c;
  }

  WaitingService& svc_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  asio::steady_timer timer_;
  bool armed_ = false;
  Clock::time_point armed_at_{};
  std::unordered_map<std::string, Queue> queues_;
  Events events_;
  Counters st_;
  bool stopping_ = false;
  std::thread thread_;
};

void Waiter::resume() {
  Waiter* self = this;
  svc->loop_->post([self] { self->svc->loop_->on_decided(self); });
}

WaitingService::WaitingService(DecisionService& decisions)
    : decisions_(decisions), loop_(std::make_unique<Loop>(*this)) {
  decisions_.set_release_listener([this](const Policy& policy, std::string_view key) { released(policy, key); });
}

WaitingService::~WaitingService() {
  shutdown();
  loop_.reset();
}

size_t WaitingService::shard_of(std::string_view policy, std::string_view key) {
  const size_t h = std::hash<std::string_view>{}(key) * 31 + std::hash<std::string_view>{}(policy);
  return h % kShards;
}

bool WaitingService::decide(const Snapshot& snapshot, std::span<const Item> items, Atomicity atomicity,
                            Micros budget, Pending& p) {
  const bool one = items.size() == 1 && items[0].kind == StoreOp::Kind::kAcquire;
  const Rule* rule = one ? items[0].rule : nullptr;
  const bool may_wait = one && rule->max_wait > Micros{0} && budget > Micros{0} && !rule->shadow &&
                        !snapshot.shadow_all && !stopped_.load(std::memory_order_relaxed);
  if (!may_wait && !(one && rule->hold_delay)) return decisions_.decide(snapshot, items, atomicity, p);

  if (!p.waiter_) {
    p.waiter_.reset(new Waiter);
    p.waiter_->svc = this;
    p.waiter_->outer = &p;
  }
  Waiter& w = *p.waiter_;
  const Item& item = items[0];
  w.generation.fetch_add(1);
  w.snapshot = &snapshot;
  w.item = item;
  w.qkey.assign(rule->policy.name());
  w.qkey += '\0';
  w.qkey.append(item.key);
  w.shard = shard_of(rule->policy.name(), item.key);
  w.may_wait = may_wait;
  w.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::min(budget, rule->max_wait));
  w.cancel_requested = false;
  w.expired = false;
  w.has_last = false;
  w.has_event = false;
  w.phase = Waiter::Phase::kFirst;
  Waiter* wp = &w;
  if (may_wait && queued_[w.shard].load() > 0) {
    // Its shard has waiters (maybe on this key): the waiting thread decides whether it joins a
    // queue, so it cannot overtake them.
    loop_->post([this, wp] { loop_->enqueue(wp, false); });
    return false;
  }
  w.epoch0 = epoch_[w.shard].load();
  if (!decisions_.decide(snapshot, {&w.item, 1}, Atomicity::kIndependent, w)) return false;
  // Answered inline (memory store): admitted, or not worth waiting for, is answered now.
  const bool ok = w.status.is_ok();
  const Decision* d = ok ? &w.decisions.front() : nullptr;
  const bool hold = ok && d->allowed && rule->hold_delay && d->delay > Micros{0};
  const bool queue = ok && may_wait && retryable(*d) &&
                     (rule->policy.is_concurrency() || Clock::now() + d->retry_after <= w.deadline);
  if (!hold && !queue) {
    p.status = w.status;
    p.decisions = w.decisions;
    p.shadow_denied = w.shadow_denied;
    if (ok) rule->counters->count(outcome_of(*d, false));
    w.phase = Waiter::Phase::kDone;
    return true;
  }
  if (hold) {
    loop_->post([this, wp] { loop_->admitted(wp, Clock::now()); });
    return false;
  }
  w.last = *d;
  w.last_at = Clock::now();
  w.has_last = true;
  loop_->post([this, wp] { loop_->enqueue(wp, true); });
  return false;
}

void WaitingService::cancel(Pending& p) {
  Waiter* w = p.waiter_.get();
  if (w == nullptr) return;
  const uint64_t generation = w->generation.load();
  loop_->post([this, w, generation] { loop_->cancel(w, generation); });
}

void WaitingService::shutdown() {
  if (stopped_.exchange(true)) return;
  Mutex mu;
  std::condition_variable cv;
  bool done = false;  // under mu (a local: no RL_GUARDED_BY)
  loop_->post([&] {
    loop_->shutdown();
    MutexLock lock(mu);
    done = true;
    cv.notify_one();
  });
  MutexLock lock(mu);
  while (!done) lock.wait(cv);
}

WaitStats WaitingService::stats() const { return loop_->stats(); }

void WaitingService::released(const Policy& policy, std::string_view key) {
  const size_t shard = shard_of(policy.name(), key);
  epoch_[shard].fetch_add(1);
  if (queued_[shard].load() == 0) return;
  std::string qkey(policy.name());
  qkey += '\0';
  qkey.append(key);
  loop_->post([this, qkey = std::move(qkey)] { loop_->wake(qkey); });
}

}  // namespace ratelimit::service
