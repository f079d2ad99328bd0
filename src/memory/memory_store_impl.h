// memory_store_impl.h — MemoryStore::Impl: the shards and the decision paths that run under
// their locks (one key: decide_one; all or nothing over several: decide_all). Private to
// src/memory; included by memory_store.cc only.
// Why apart from memory_store.cc: this is the locking and state bookkeeping around algo::decide;
// memory_store.cc is the public surface (validation, async adapters, counts, snapshots).
// Invariants: the clock is read once per call, before any lock is taken; every decision is
// algo::decide / algo::decide_all from src/core; a peek never creates an entry; an entry whose
// state is idle after a decision is dropped at once (or never created); decide_all takes its
// shard locks in ascending index order and writes back only after all decisions are made.
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "conflict_pass.h"
#include "key_hash.h"
#include "mutex.h"
#include "ratelimit/memory_store.h"
#include "shard.h"
#include "state_peek.h"

namespace ratelimit {

using algo::AlgorithmState;
using algo::Op;
using memory::kNil;
using memory::Shard;

struct MemoryStore::Impl {
  const Clock* clock = nullptr;
  uint64_t seed = 0;
  unsigned shard_shift = 64;  // hash >> shard_shift = shard index
  size_t shard_count = 1;
  std::unique_ptr<Shard[]> shards;

  using Where = memory::KeySite;
  // The sum over the shards of one of their (thread-safe) counts.
  size_t sum(size_t (Shard::*count)() const) const {
    size_t n = 0;
    for (size_t k = 0; k < shard_count; ++k) n += (shards[k].*count)();
    return n;
  }
  Where locate(const Policy& policy, std::string_view key) const {
    const uint64_t nh = memory::name_hash(seed, policy.name_hash());
    const uint64_t h = memory::key_hash(nh, key);
    return {nh, h, shard_shift >= 64 ? 0 : static_cast<size_t>(h >> shard_shift)};
  }

  static Status too_many_policies() {
    return Status::resource_exhausted("more than 65,534 policy names in use in one shard");
  }

  // decide_one on a key held in slot `i` of `shard`, and what the decision leaves: the entry's
  // standing, or the entry dropped once idle; bytes shed if a log grew. One named result
  // (NRVO): the Decision algo::decide writes is the caller's, never copied.
  static Decision decide_held(Shard& shard, uint32_t i, uint64_t hash, const Policy& policy,
                              int64_t now, int64_t cost, Op op, const LeaseId& lease,
                              const adaptive::ReleaseReport& report) RL_REQUIRES(shard.mu) {
    Decision d = policy.is_concurrency()
                     ? shard.decide_lease(i, policy, now, cost, op, lease, report)
                     : shard.decide(i, policy, now, cost, op);
    // An admitted acquire holds the units it took: not idle, no need to ask.
    if (op == Op::kAcquire && d.allowed) {
      shard.touch(i, memory::standing_after(d, memory::kRoomy));
    } else if (shard.idle_at(i) <= now) {
      shard.remove(i, hash);
      return d;
    } else if (op == Op::kAcquire || op == Op::kReport) {  // writes (a report is never refused)
      shard.touch(i, memory::standing_after(d, shard.standing(i)));
    }
    if (shard.over_byte_share()) shard.shed_bytes({&i, 1}, now);  // a log grew
    return d;
  }

  // One op on one key; inputs already validated. `lease`: the lease a release or renew names
  // (a concurrency acquire draws its own, outside the lock).
  Result<Decision> decide_one(const Policy& policy, std::string_view key, int64_t cost, Op op,
                              LeaseId lease = {}, const adaptive::ReleaseReport& report = {}) {
    const bool leases = policy.is_concurrency();
    if (leases && op == Op::kAcquire) lease = new_lease_id();
    const int64_t now = clock->now().count();
    const Where w = locate(policy, key);
    Shard& shard = shards[w.shard];
    ScopedLock lock(shard.mu);
    shard.begin_op(now);
    bool conflict;
    uint32_t i = shard.find_named(policy, w.name_hash, key, w.hash, conflict);
    if (conflict) [[unlikely]] {
      // The key's state was written under another meaning of this name (issue 31): refused
      // while it lives; once idle it is dropped and this definition starts the key afresh.
      const int64_t idle_at = shard.idle_at(i);
      if (idle_at > now) return algo::conflict_decision(policy, idle_at - now);
      shard.remove(i, w.hash);
      i = kNil;
    }
    if (i != kNil) {
      // The Decision is written once, by algo::decide, into the Result returned (from_call).
      return Result<Decision>::from_call([&]() RL_NO_THREAD_SAFETY_ANALYSIS {  // `lock` holds it
        return decide_held(shard, i, w.hash, policy, now, cost, op, lease, report);
      });
    }
    // Acquires and reports write; a report is never refused, so what it leaves decides.
    const bool writes = op == Op::kAcquire || op == Op::kReport;
    // A new key: the policy's id, creating it for a write (a peek still records a
    // redefinition under a known name).
    const uint16_t id = shard.policy_id(policy, w.name_hash, writes);
    AlgorithmState state = shard.starting_state(policy, w.name_hash, w.hash, now);
    const Decision d = algo::decide(policy, state, now, cost, op, lease, report);
    if ((op == Op::kAcquire && d.allowed) || (writes && algo::idle_at_us(policy, state) > now)) {
      if (id == memory::kNoPolicy) return too_many_policies();
      shard.insert(id, key, w.hash, std::move(state), memory::standing_after(d, memory::kRoomy),
                   now);
    }
    return d;
  }

  // All or nothing over `ops` (inputs already validated: distinct (policy, key) pairs). The
  // shards involved are locked in ascending index order, so concurrent calls cannot deadlock;
  // every decision is algo::decide_all's, and states are written back only after it.
  // Outside -Wthread-safety: the analysis cannot follow a run-time set of locks (shards[i].mu
  // for the i in `locked`); every shard touched below is one of them (where[k].shard).
  Status decide_all(std::span<const StoreOp> ops, std::vector<Decision>& out)
      RL_NO_THREAD_SAFETY_ANALYSIS {
    const int64_t now = clock->now().count();
    const size_t n = ops.size();
    std::array<Where, kMaxOpsPerCall> where{};
    std::array<size_t, kMaxOpsPerCall> locked{};  // distinct shard indices, ascending
    for (size_t k = 0; k < n; ++k) {
      where[k] = locate(*ops[k].policy, ops[k].key);
      locked[k] = where[k].shard;
    }
    std::sort(locked.begin(), locked.begin() + static_cast<ptrdiff_t>(n));
    const size_t nlocked = static_cast<size_t>(
        std::unique(locked.begin(), locked.begin() + static_cast<ptrdiff_t>(n)) - locked.begin());
    struct Unlock {  // releases in reverse order, also if an allocation throws
      Impl* self;
      std::array<size_t, kMaxOpsPerCall>* indices;
      size_t count = 0;
      ~Unlock() {
        while (count > 0) self->shards[(*indices)[--count]].mu.unlock();
      }
    } unlock{this, &locked};
    for (; unlock.count < nlocked; ++unlock.count) shards[locked[unlock.count]].mu.lock();

    for (size_t k = 0; k < n; ++k) shards[where[k].shard].begin_op(now);
    std::array<uint16_t, kMaxOpsPerCall> ids{};
    std::array<uint32_t, kMaxOpsPerCall> slots{};
    std::array<AlgorithmState, kMaxOpsPerCall> states;
    std::array<algo::LimitOp, kMaxOpsPerCall> items{};
    for (size_t k = 0; k < n; ++k) {
      // A peek never creates a policy (nor an entry); a write's id is made before any change.
      const bool writes = ops[k].kind == StoreOp::Kind::kAcquire || ops[k].kind == StoreOp::Kind::kReport;
      ids[k] = shards[where[k].shard].policy_id(*ops[k].policy, where[k].name_hash, writes);
      if (writes && ids[k] == memory::kNoPolicy) return too_many_policies();
    }
    // A key holding live state of another meaning of its policy's name refuses the whole call
    // (issue 31): conflict_pass.h.
    if (memory::find_or_refuse(shards.get(), ops, where.data(), now, slots.data(), out)) return {};
    for (size_t k = 0; k < n; ++k) {
      Shard& shard = shards[where[k].shard];
      states[k] = slots[k] != kNil ? shard.take_state(slots[k])
                                   : shard.starting_state(*ops[k].policy, where[k].name_hash,
                                                          where[k].hash, now);
      items[k] = {ops[k].policy, &states[k], ops[k].cost, algo::op_of(ops[k].kind)};
    }
    out.reserve(n);
    const bool all = algo::decide_all(std::span(items.data(), n), now, out);

    // Existing entries first (slot indices stay valid until something is inserted, which may
    // evict), then the new ones (only acquires that consumed, or left state worth keeping); no
    // eviction takes an entry of this call while another can go.
    std::array<uint32_t, kMaxOpsPerCall> in_use{};  // by k; kNil once removed
    for (size_t k = 0; k < n; ++k) {
      in_use[k] = slots[k];
      if (slots[k] == kNil) continue;
      Shard& shard = shards[where[k].shard];
      shard.put_state(slots[k], std::move(states[k]));
      if (all && items[k].op == Op::kAcquire) {
        shard.touch(slots[k], memory::standing_after(out[k], memory::kRoomy));
      } else if (shard.idle_at(slots[k]) <= now) {
        shard.remove(slots[k], where[k].hash);
        in_use[k] = kNil;
      } else if ((items[k].op == Op::kAcquire && !out[k].allowed) ||  // the limit that refused
                 (all && items[k].op == Op::kReport)) {
        shard.touch(slots[k], memory::standing_after(out[k], shard.standing(slots[k])));
      }
    }
    // The slots of this call that live in `shard`.
    std::array<uint32_t, kMaxOpsPerCall> keep{};
    auto keep_in = [&](size_t shard) {
      size_t m = 0;
      for (size_t j = 0; j < n; ++j) {
        if (in_use[j] != kNil && where[j].shard == shard) keep[m++] = in_use[j];
      }
      return std::span<const uint32_t>(keep.data(), m);
    };
    for (size_t k = 0; k < n; ++k) {
      if (slots[k] != kNil || (items[k].op != Op::kAcquire && items[k].op != Op::kReport)) continue;
      if ((all && items[k].op == Op::kAcquire) || algo::idle_at_us(*ops[k].policy, states[k]) > now) {
        const size_t sh = where[k].shard;
        in_use[k] = shards[sh].insert(ids[k], ops[k].key, where[k].hash, std::move(states[k]),
                                      memory::standing_after(out[k], memory::kRoomy), now,
                                      keep_in(sh));
      }
    }
    for (size_t m = 0; m < nlocked; ++m) {
      if (shards[locked[m]].over_byte_share()) shards[locked[m]].shed_bytes(keep_in(locked[m]), now);
    }
    return {};
  }
};

}  // namespace ratelimit
