// waiting_loop.cc — WaitingService::Loop (waiting_loop.h): the one waiting thread. Queues per
// (policy, key), the timed events (waiters' deadlines, queues' retry times, shaping holds) on
// one steady timer, re-decisions of a queue's head (one store call per wake-up), and the answers
// to waiters. Why one thread: queue state then needs no lock, and FIFO order is the order of
// this thread's work. The design and the lost-wake-up argument are at the top of waiting.cc.
#include "waiting_loop.h"

#include <algorithm>
#include <vector>

namespace ratelimit::service {

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


// `d` as seen `elapsed` after it was decided.
Decision aged(Decision d, Clock::duration elapsed) {
  const Micros e = std::chrono::duration_cast<Micros>(elapsed);
  d.retry_after = std::max(Micros{1}, d.retry_after - e);
  d.reset_after = std::max(Micros{0}, d.reset_after - e);
  return d;
}

}  // namespace

void WaitingService::Loop::enqueue(Waiter* w, bool decided) {
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

void WaitingService::Loop::wake(const std::string& qkey, const LeaseId* lease) {
  if (lease != nullptr) {
    if (seen_.erase(*lease) > 0) return;  // its first arrival woke the queue
    if (seen_order_.size() >= kSeenReleases) {
      seen_.erase(seen_order_.front());
      seen_order_.pop_front();
    }
    seen_.insert(*lease);
    seen_order_.push_back(*lease);
  }
  auto it = queues_.find(qkey);
  if (it != queues_.end()) kick(it->second);
}

void WaitingService::Loop::wake_all() {
  for (auto& [qkey, q] : queues_) kick(q);
}

void WaitingService::Loop::cancel(Waiter* w, uint64_t generation) {
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

void WaitingService::Loop::shutdown() {
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
    adopt_last(q, w);
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

void WaitingService::Loop::on_decided(Waiter* w) {
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

void WaitingService::Loop::admitted(Waiter* w, Clock::time_point now) {
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

WaitStats WaitingService::Loop::stats() const {
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

void WaitingService::Loop::first_decided(Waiter* w, Clock::time_point now) {
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

void WaitingService::Loop::kick(Queue& q) {
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

void WaitingService::Loop::post_kick(const std::string& qkey) {
  post([this, qkey] { wake(qkey, nullptr); });
}

void WaitingService::Loop::after_change(Queue& q, const std::string& qkey, bool now_too) {
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

void WaitingService::Loop::drop_if_idle(const std::string& qkey) {
  auto it = queues_.find(qkey);
  if (it == queues_.end() || !it->second.waiters.empty() || it->second.deciding) return;
  if (it->second.has_retry) events_.erase(it->second.retry);
  queues_.erase(it);
}

void WaitingService::Loop::adopt_last(const Queue& q, Waiter* w) {
  if (w->has_last || !q.has_last) return;
  w->last = q.last;
  w->last_at = q.last_at;
  w->has_last = true;
}

void WaitingService::Loop::remove(Queue& q, Waiter* w) {
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

void WaitingService::Loop::drop_event(Waiter* w) {
  if (w->has_event) events_.erase(w->event);
  w->has_event = false;
}

void WaitingService::Loop::arm_retry(Queue& q, const std::string& qkey, Clock::time_point at) {
  if (q.has_retry) events_.erase(q.retry);
  q.retry = events_.emplace(at, Event{Event::Kind::kRetry, nullptr, qkey});
  q.has_retry = true;
  rearm();
}

void WaitingService::Loop::rearm() {
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

void WaitingService::Loop::fire() {
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
          adopt_last(q, w);
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

void WaitingService::Loop::answer(Waiter* w) {
  Pending& o = *w->outer;
  o.status = w->status;
  o.decisions = w->decisions;
  o.shadow_denied = w->shadow_denied;
  if (o.status.is_ok()) w->item.rule->counters->count(outcome_of(o.decisions.front(), false));
  w->phase = Waiter::Phase::kDone;
  o.resume();
}

void WaitingService::Loop::answer_denied(Waiter* w, Clock::time_point now, Why why) {
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

void WaitingService::Loop::answer_gone(Waiter* w) {
  w->status = Status::unavailable("the client went away while waiting");
  w->decisions.clear();
  Pending& o = *w->outer;
  o.status = w->status;
  o.decisions.clear();
  o.shadow_denied.clear();
  w->phase = Waiter::Phase::kDone;
  o.resume();
}

void WaitingService::Loop::compensate(Waiter* w, const Decision& d) {
  if (d.lease.empty() || svc_.stopped_.load()) return;  // a rate unit cannot be given back
  auto* c = new Compensation(*w->item.rule);
  c->key.assign(w->item.key);
  c->item = Item{&c->rule, c->key, 1, StoreOp::Kind::kRelease, nullptr, d.lease};
  if (svc_.decisions_.decide(Compensation::kNoShadow, {&c->item, 1}, Atomicity::kIndependent, *c)) delete c;
}

void Waiter::resume() {
  Waiter* self = this;
  svc->loop_->post([self] { self->svc->loop_->on_decided(self); });
}

}  // namespace ratelimit::service
