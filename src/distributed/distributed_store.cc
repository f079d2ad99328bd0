// distributed_store.cc — DistributedStore: local decisions for lease and async policies, the
// shared store asked once per slice or sync_interval (contract in
// include/ratelimit/distributed_store.h; the math in src/core/consistency.cc, per key in
// key_state.{h,cc}).
//
// Layout: one map of KeyState under one mutex (decisions hold it for a few hundred ns; the
// shared store's completions take it to apply a view). A background thread sleeps until the
// earliest time any key has work (a push, a slice's expiry, being dropped; at least 0.5 ms,
// at most 100 ms), then asks each key what it must send and whether it can be dropped — so
// the O(keys) scan runs about twice per sync_interval, and a push is late by scheduling
// jitter only.
// Invariants:
//   - no lock is held while a completion runs or the shared/inner store is called;
//   - every op of a decide_many call is answered exactly once (a Batch counts them down);
//   - Core outlives every call in flight (completions hold a shared_ptr to it).
#include "ratelimit/distributed_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "background_thread.h"
#include "key_state.h"
#include "map_key.h"
#include "mutex.h"

namespace ratelimit {
namespace {

// One decide_many call's answers, counted down as its ops complete.
struct Batch {
  std::vector<Decision> decisions;
  std::atomic<size_t> remaining{0};
  Mutex mu;
  Status error RL_GUARDED_BY(mu);  // the inner store's error, if its part failed
  OpsCallback done;

  void finish_one() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Status failed;
    {
      MutexLock lock(mu);
      failed = error;
    }
    if (!failed.is_ok()) return done(failed);
    done(std::span<const Decision>(decisions));
  }
};

}  // namespace

struct DistributedStore::Core : std::enable_shared_from_this<DistributedStore::Core> {
  DistributedStoreOptions options;
  const Clock* clock = &MonotonicClock::instance();
  std::shared_ptr<Store> inner;
  std::shared_ptr<SharedCounts> shared;
  distributed_detail::Counters counters;

  Mutex mu;
  std::unordered_map<std::string, distributed_detail::KeyState> keys RL_GUARDED_BY(mu);
  std::atomic<int64_t> offset_us{0};  // the store's clock minus ours, from the last reply
  std::atomic<int64_t> earliest_due{0};  // local time before which no key has work

  BackgroundThread ticker;  // run_ticker(); due_by() wakes it

  // Calls in flight, for flush().
  Mutex flight_mu;
  std::condition_variable flight_cv;
  int64_t in_flight RL_GUARDED_BY(flight_mu) = 0;

  int64_t now() const { return clock->now().count(); }

  // Sends what `sends` lists; each reply is applied to its key under the lock, and the
  // answers it releases run after the lock is dropped.
  void send_all(std::vector<distributed_detail::Send> sends) {
    for (auto& s : sends) send(std::move(s));
  }

  void send(distributed_detail::Send s) {
    {
      MutexLock lock(flight_mu);
      ++in_flight;
    }
    auto self = shared_from_this();
    auto on_reply = [self, s](Result<algo::SharedView> view) {
      std::vector<distributed_detail::Answer> answers;
      std::vector<distributed_detail::Send> more;
      const int64_t local = self->now();
      int64_t due = INT64_MAX;  // a new slice may expire before the thread planned to look
      if (view.ok()) self->offset_us.store(view->now_us - local, std::memory_order_relaxed);
      {
        MutexLock lock(self->mu);
        auto it = self->keys.find(s.map_key);
        if (it != self->keys.end() && it->second.generation() == s.generation) {
          const int64_t offset = self->offset_us.load(std::memory_order_relaxed);
          it->second.on_reply(s, view, local, offset, self->options, self->counters, answers, more);
          due = it->second.due_at(offset);
        } else if (view.ok()) {
          distributed_detail::KeyState::count_orphan_reply(s, *view, self->counters);
        }
      }
      self->due_by(due);
      for (auto& a : answers) a.done(a.decision);
      self->send_all(std::move(more));
      {
        MutexLock lock(self->flight_mu);
        --self->in_flight;
      }
      self->flight_cv.notify_all();
    };
    if (s.kind == distributed_detail::Send::Kind::kReserve) {
      shared->reserve_async(s.policy, s.user_key, s.window_us, s.give_back, s.want, on_reply);
    } else {
      shared->add_hits_async(s.policy, s.user_key, s.window_us, s.hits, on_reply);
    }
  }

  // One background round: due pushes, expired slices, idle keys dropped.
  void tick() {
    std::vector<distributed_detail::Send> sends;
    const int64_t local = now();
    if (local < earliest_due.load(std::memory_order_relaxed)) return;
    const int64_t offset = offset_us.load(std::memory_order_relaxed);
    uint64_t age = 0, held = 0, pending = 0;
    int64_t due = local + 1'000'000;  // look again within a second at the latest (the gauges)
    {
      MutexLock lock(mu);
      for (auto it = keys.begin(); it != keys.end();) {
        distributed_detail::KeyState& k = it->second;
        k.tick(local, offset, options, counters, sends);
        due = std::min(due, k.due_at(offset));
        age = std::max(age, k.view_age_us(local));
        held += k.units_held();
        pending += k.units_pending();
        if (k.idle(local)) {
          it = keys.erase(it);
        } else {
          ++it;
        }
      }
      counters.keys.store(keys.size(), std::memory_order_relaxed);
      earliest_due.store(due, std::memory_order_relaxed);
    }
    counters.view_age_us.store(age, std::memory_order_relaxed);
    counters.units_held.store(held, std::memory_order_relaxed);
    counters.units_pending.store(pending, std::memory_order_relaxed);
    send_all(std::move(sends));
  }

  void run_ticker() {
    MutexLock lock(ticker.mu);
    while (!ticker.stopping) {
      const int64_t wait =
          std::clamp<int64_t>(earliest_due.load(std::memory_order_relaxed) - now(), 500, 100'000);
      lock.wait_for(ticker.wake, std::chrono::microseconds(wait));
      if (ticker.stopping) break;
      lock.unlock();
      tick();
      lock.lock();
    }
  }

  // Work came due earlier than the background thread planned (a new key, a new slice).
  void due_by(int64_t due) {
    if (due >= earliest_due.load(std::memory_order_relaxed)) return;
    earliest_due.store(due, std::memory_order_relaxed);
    MutexLock lock(ticker.mu);  // no lost wake-up: the thread waits holding it
    ticker.wake.notify_one();
  }

  // Everything held goes back to the store now.
  void flush_all() {
    std::vector<distributed_detail::Send> sends;
    {
      MutexLock lock(mu);
      for (auto& [key, k] : keys) k.flush(now(), offset_us.load(std::memory_order_relaxed), counters, sends);
    }
    send_all(std::move(sends));
  }

  bool wait_flights(Micros bound) {
    const auto until = std::chrono::steady_clock::now() + bound;
    MutexLock lock(flight_mu);
    while (in_flight != 0) {
      if (lock.wait_until(flight_cv, until) == std::cv_status::timeout) return in_flight == 0;
    }
    return true;
  }

  // Decides one op of a lease/async policy: inline into `*out` (true), or later through
  // `later` (false).
  bool decide_op(const StoreOp& op, Decision* out, std::function<void(Decision)> later,
                 bool& passthrough) {
    const int64_t local = now();
    const int64_t offset = offset_us.load(std::memory_order_relaxed);
    std::vector<distributed_detail::Send> sends;
    bool inline_answer = false;
    bool new_key = false;
    {
      MutexLock lock(mu);
      std::string mk = distributed_detail::map_key(*op.policy, op.key);
      auto it = keys.find(mk);
      if (it == keys.end()) {
        if (keys.size() >= options.max_keys) {
          counters.exact_passthrough.fetch_add(1, std::memory_order_relaxed);
          passthrough = true;
          return false;
        }
        it = keys.emplace(mk, distributed_detail::KeyState(*op.policy, op.key, mk)).first;
        new_key = true;
      } else if (it->second.policy() != *op.policy) {
        // Redefined (a reload): what the old definition held goes back and the key starts
        // over — once its calls in flight are answered; until then this op is decided exactly.
        if (it->second.busy()) {
          counters.exact_passthrough.fetch_add(1, std::memory_order_relaxed);
          passthrough = true;
          return false;
        }
        it->second.flush(local, offset, counters, sends);
        if (it->second.busy()) {
          // The flush sent something: its reply must find this state.
          passthrough = true;
          counters.exact_passthrough.fetch_add(1, std::memory_order_relaxed);
        } else {
          it->second = distributed_detail::KeyState(*op.policy, op.key, mk, it->second.generation() + 1);
        }
      }
      if (passthrough) {
        inline_answer = false;
      } else {
      inline_answer = it->second.decide(op.cost, op.kind == StoreOp::Kind::kPeek, local, offset,
                                        options, counters, out, std::move(later), sends);
      }
    }
    if (new_key) due_by(local);
    send_all(std::move(sends));
    return inline_answer;
  }
};

Result<std::shared_ptr<DistributedStore>> DistributedStore::wrap(
    std::shared_ptr<Store> inner, std::shared_ptr<SharedCounts> shared, DistributedStoreOptions options) {
  if (!inner || !shared) return Status::invalid_argument("DistributedStore needs an inner and a shared store");
  if (options.stale_after < Micros{1'000} || options.stale_after > Micros{3'600'000'000}) {
    return Status::invalid_argument("stale_after must be between 1ms and 1h");
  }
  if (options.max_keys < 1 || options.max_keys > 100'000'000) {
    return Status::invalid_argument("max_keys must be between 1 and 100000000");
  }
  if (options.flush_timeout < Micros{0}) return Status::invalid_argument("flush_timeout must be >= 0");
  auto core = std::make_shared<Core>();
  core->options = options;
  if (options.clock != nullptr) core->clock = options.clock;
  core->inner = inner;
  core->shared = std::move(shared);
  core->ticker.start([c = core.get()] { c->run_ticker(); });
  return std::shared_ptr<DistributedStore>(new DistributedStore(std::move(inner), std::move(core)));
}

DistributedStore::DistributedStore(std::shared_ptr<Store> inner, std::shared_ptr<Core> core)
    : StoreDecorator(std::move(inner)), core_(std::move(core)) {}

DistributedStore::~DistributedStore() {
  core_->ticker.stop();
  core_->flush_all();
  core_->wait_flights(core_->options.flush_timeout);
}

Status DistributedStore::flush(Micros bound) {
  core_->flush_all();
  if (core_->wait_flights(bound)) return {};
  return Status::deadline_exceeded("calls to the shared store still in flight after the flush bound");
}

void DistributedStore::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                         OpsCallback done) {
  if (Status s = validate_decide_many(ops, atomicity); !s.is_ok()) return done(s);
  size_t local = 0;
  for (const StoreOp& op : ops) {
    if (op.policy->consistency().mode != Consistency::kExact) ++local;
  }
  // A report is recorded in the shared store at once (exact, never lost); this instance's
  // local view (its lease slice, its unsent hits) learns of it at its next sync, so the bound
  // on what the mode admits beyond the limit is unchanged by reports (docs/usage.md).
  const bool reports = std::any_of(ops.begin(), ops.end(),
                                   [](const StoreOp& op) { return op.kind == StoreOp::Kind::kReport; });
  if (local == 0 || reports || (atomicity == Atomicity::kAllOrNothing && ops.size() > 1)) {
    return inner().decide_many_async(ops, atomicity, std::move(done));
  }
  // The common case, one local op answered inline: no allocation beyond the key's lookup.
  if (ops.size() == 1) {
    Decision d;
    bool passthrough = false;
    if (core_->decide_op(ops[0], &d, [done](Decision later) { done(std::span<const Decision>(&later, 1)); },
                         passthrough)) {
      return done(std::span<const Decision>(&d, 1));
    }
    if (passthrough) inner().decide_many_async(ops, atomicity, std::move(done));
    return;
  }
  auto batch = std::make_shared<Batch>();
  batch->decisions.resize(ops.size());
  batch->done = std::move(done);
  batch->remaining.store(ops.size() + 1, std::memory_order_relaxed);  // +1: this call's own
  std::vector<StoreOp> exact;
  std::vector<size_t> exact_index;
  for (size_t i = 0; i < ops.size(); ++i) {
    bool passthrough = ops[i].policy->consistency().mode == Consistency::kExact;
    if (!passthrough) {
      auto answer = [batch, i](Decision d) {
        batch->decisions[i] = d;
        batch->finish_one();
      };
      if (core_->decide_op(ops[i], &batch->decisions[i], answer, passthrough)) {
        batch->finish_one();
        continue;
      }
    }
    if (passthrough) {
      exact.push_back(ops[i]);
      exact_index.push_back(i);
    }
  }
  if (!exact.empty()) {
    batch->remaining.fetch_add(1, std::memory_order_relaxed);
    // The ops whose answers come from the inner call count down once, together.
    batch->remaining.fetch_sub(exact.size(), std::memory_order_relaxed);
    inner().decide_many_async(exact, Atomicity::kIndependent,
                              [batch, exact_index](Result<std::span<const Decision>> r) {
                                if (!r.ok()) {
                                  MutexLock lock(batch->mu);
                                  batch->error = r.status();
                                } else {
                                  for (size_t k = 0; k < exact_index.size() && k < r->size(); ++k) {
                                    batch->decisions[exact_index[k]] = (*r)[k];
                                  }
                                }
                                batch->finish_one();
                              });
  }
  batch->finish_one();
}

void DistributedStore::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  {
    MutexLock lock(core_->mu);
    auto it = core_->keys.find(distributed_detail::map_key(policy, key));
    if (it != core_->keys.end()) it->second.forget();
  }
  inner().reset_async(policy, key, std::move(done));
}

DistributedCounters DistributedStore::counters() const {
  DistributedCounters c = core_->counters.snapshot();
  // Units held in slices and pending pushes as of now: the ticker's gauges are a round old (up
  // to ~1 s), and a slice's units change with every local decision.
  uint64_t held = 0, pending = 0;
  MutexLock lock(core_->mu);
  for (const auto& [name, k] : core_->keys) {
    held += k.units_held();
    pending += k.units_pending();
  }
  c.lease_units_held = held;
  c.async_units_pending = pending;
  return c;
}


}  // namespace ratelimit
