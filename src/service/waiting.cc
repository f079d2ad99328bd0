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
#include <functional>
#include <mutex>

#include "mutex.h"
#include "waiting_loop.h"

namespace ratelimit::service {

void WaiterDeleter::operator()(Waiter* w) const { delete w; }

WaitingService::WaitingService(DecisionService& decisions)
    : decisions_(decisions), loop_(std::make_unique<Loop>(*this)) {
  decisions_.set_release_listener([this](const Policy& policy, std::string_view key, const LeaseId& lease) {
    released(policy.name(), key, lease, true);
  });
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
  p.queued = false;
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
  const bool queue = ok && may_wait &&
                     algo::worth_waiting(*d, rule->policy.is_concurrency(), micros(Clock::now()),
                                         micros(w.deadline));
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

void WaitingService::released_elsewhere(std::string_view policy, std::string_view key, const LeaseId& lease) {
  released(policy, key, lease, false);
}

void WaitingService::resubscribed() {
  feed_.store(true);
  for (auto& e : epoch_) e.fetch_add(1);  // a waiter between its denial and its enqueue decides again
  loop_->post([this] { loop_->wake_all(); });
}

void WaitingService::released(std::string_view policy, std::string_view key, const LeaseId& lease, bool own) {
  const size_t shard = shard_of(policy, key);
  epoch_[shard].fetch_add(1);
  if (queued_[shard].load() == 0) return;
  std::string qkey(policy);
  qkey += '\0';
  qkey.append(key);
  // With a feed, each release arrives twice (here, and heard on the feed) in either order: the
  // first wakes the queue and is remembered by id, the second finds it and is dropped.
  const bool dedupe = feed_.load(std::memory_order_relaxed) || !own;
  loop_->post([this, qkey = std::move(qkey), lease, dedupe] { loop_->wake(qkey, dedupe ? &lease : nullptr); });
}

}  // namespace ratelimit::service
