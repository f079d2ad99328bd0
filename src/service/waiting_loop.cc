// waiting_loop.cc — WaitingService::Loop (waiting_loop.h): the one waiting thread. Queues per
// (policy, key) and the re-decisions of a queue's head (one store call per wake-up), by the
// waiting rules of src/core (include/ratelimit/waiting_rule.h); the timed events and the
// answers to waiters are waiting_events.cc. Why one thread: queue state then needs no lock, and FIFO order is the order of
// this thread's work. The design and the lost-wake-up argument are at the top of waiting.cc.
#include "waiting_loop.h"

#include <algorithm>
#include <vector>

namespace ratelimit::service {

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
  w->outer->queued = true;
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
    charge(q, w);
    remove(q, w);
    ++st_.admitted;
    admitted(w, now);
    const bool room = !q.waiters.empty() &&
                      algo::next_decided_at_once(d, concurrency, q.waiters.front()->item.cost);
    after_change(q, qkey, room);
    return;
  }
  const bool can_wait = ok && !w->expired && now < w->deadline && !svc_.stopped_.load() &&
                        algo::worth_waiting(d, concurrency, micros(now), micros(w->deadline));
  if (ok && algo::waitable(d)) {
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
  if (ok && algo::waitable(d)) {
    answer_denied(w, now, svc_.stopped_.load() ? &Counters::shutdown : &Counters::timed_out);
  } else {
    answer(w);  // a store error, a cost above the capacity, a failed-closed store
  }
  if (!q.waiters.empty() && ok && algo::waitable(d)) arm_retry(q, qkey, now + d.retry_after);
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
  if (!w->may_wait || !ok || svc_.stopped_.load() ||
      !algo::worth_waiting(d, w->item.rule->policy.is_concurrency(), micros(now),
                           micros(w->deadline))) {
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
  order_head(q);
  Waiter* w = q.waiters.front();
  q.deciding = true;
  w->phase = Waiter::Phase::kDeciding;
  ++st_.wakeups;
  if (svc_.decisions_.decide(*w->snapshot, {&w->item, 1}, Atomicity::kIndependent, *w)) on_decided(w);
}

// The classes' waiting mask of `q` (a waiter of a class a reloaded config no longer has counts
// as the lowest class).
std::array<bool, algo::kMaxClasses> WaitingService::Loop::waiting_classes(const Queue& q, size_t n) {
  std::array<bool, algo::kMaxClasses> waiting{};
  for (const Waiter* w : q.waiters) waiting[std::min<size_t>(w->item.priority, n - 1)] = true;
  return waiting;
}

void WaitingService::Loop::order_head(Queue& q) {
  const auto& classes = q.waiters.front()->item.rule->classes;
  const size_t n = classes.size();
  if (n < 2) return;
  const auto waiting = waiting_classes(q, n);
  const size_t c = algo::pick_class(classes, {q.credits.data(), n}, {waiting.data(), n});
  auto it = std::find_if(q.waiters.begin(), q.waiters.end(),
                         [&](const Waiter* w) { return std::min<size_t>(w->item.priority, n - 1) == c; });
  if (it != q.waiters.end()) std::rotate(q.waiters.begin(), it, it + 1);  // the others keep their order
}

void WaitingService::Loop::charge(Queue& q, const Waiter* w) {
  const auto& classes = w->item.rule->classes;
  const size_t n = classes.size();
  if (n < 2 || q.waiters.empty()) return;
  const auto waiting = waiting_classes(q, n);
  algo::charge_class(classes, {q.credits.data(), n}, {waiting.data(), n}, std::min<size_t>(w->item.priority, n - 1));
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

void Waiter::resume() {
  Waiter* self = this;
  svc->loop_->post([self] { self->svc->loop_->on_decided(self); });
}

}  // namespace ratelimit::service
