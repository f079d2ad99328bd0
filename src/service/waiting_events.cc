// waiting_events.cc — WaitingService::Loop's timed events and answers (waiting_loop.h): the one
// steady timer over every deadline, retry time and shaping hold (rearm, fire), and how a waiter
// is answered — admitted, denied with the denial it waited on (aged to now), gone, or a lease
// taken for a client that left released at once. Runs on the waiting thread only, like
// waiting_loop.cc, whose queues it serves.
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

}  // namespace ratelimit::service
