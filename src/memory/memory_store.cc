// memory_store.cc — MemoryStore: routes each (policy name, key) to a shard by hash, and runs
// the core algorithm on its state under that shard's lock (see memory_store.h, shard.h).
//
// Invariants: the clock is read once per call, before any lock is taken; every decision is
// algo::decide / algo::decide_all from src/core; a peek never creates an entry; an entry whose
// state is idle after a decision is dropped at once (or never created); acquire_all takes its
// shard locks in ascending index order and writes back only after all decisions are made.
#include "ratelimit/memory_store.h"

#include <algorithm>
#include <array>
#include <bit>
#include <random>
#include <utility>

#include "key_hash.h"
#include "shard.h"

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

  uint64_t hash(const Policy& policy, std::string_view key) const {
    return memory::hash_key(seed, policy.name(), key);
  }
  size_t shard_index(uint64_t h) const {
    return shard_shift >= 64 ? 0 : static_cast<size_t>(h >> shard_shift);
  }

  // acquire or peek on one key; inputs already validated.
  Decision decide_one(const Policy& policy, std::string_view key, int64_t cost, Op op) {
    const int64_t now = clock->now().count();
    const uint64_t h = hash(policy, key);
    Shard& shard = shards[shard_index(h)];
    std::lock_guard lock(shard.mu);
    shard.begin_op(now);
    const uint32_t i = shard.find(policy.name(), key, h);
    if (i != kNil) {
      AlgorithmState state = shard.take_state(i);
      const Decision d = algo::decide(policy, state, now, cost, op);
      const int64_t idle_at = algo::idle_at_us(policy, state);
      shard.put_state(i, std::move(state), idle_at);
      if (idle_at <= now) {
        shard.remove(i, h);
      } else if (op == Op::kAcquire) {
        shard.touch(i);
      }
      return d;
    }
    AlgorithmState state = algo::fresh_state(policy);
    const Decision d = algo::decide(policy, state, now, cost, op);
    if (op == Op::kAcquire) {
      const int64_t idle_at = algo::idle_at_us(policy, state);
      if (idle_at > now) shard.insert(policy.name(), key, h, std::move(state), idle_at, now);
    }
    return d;
  }

  std::vector<Decision> decide_all(std::span<const Policy> policies, std::string_view key,
                                   int64_t cost) {
    const int64_t now = clock->now().count();
    const size_t n = policies.size();
    std::array<uint64_t, kMaxPoliciesPerCall> hashes{};
    std::array<size_t, kMaxPoliciesPerCall> owner{};  // shard index per policy
    std::array<size_t, kMaxPoliciesPerCall> locked{};  // distinct shard indices, ascending
    for (size_t k = 0; k < n; ++k) {
      hashes[k] = hash(policies[k], key);
      owner[k] = shard_index(hashes[k]);
      locked[k] = owner[k];
    }
    std::sort(locked.begin(), locked.begin() + static_cast<ptrdiff_t>(n));
    const size_t nlocked = static_cast<size_t>(
        std::unique(locked.begin(), locked.begin() + static_cast<ptrdiff_t>(n)) - locked.begin());
    struct Unlock {  // releases in reverse order, also if an allocation throws
      Impl* self;
      std::array<size_t, kMaxPoliciesPerCall>* indices;
      size_t count = 0;
      ~Unlock() {
        while (count > 0) self->shards[(*indices)[--count]].mu.unlock();
      }
    } unlock{this, &locked};
    for (; unlock.count < nlocked; ++unlock.count) shards[locked[unlock.count]].mu.lock();

    for (size_t k = 0; k < n; ++k) shards[owner[k]].begin_op(now);
    std::array<uint32_t, kMaxPoliciesPerCall> slots{};
    std::array<AlgorithmState, kMaxPoliciesPerCall> states;
    std::array<algo::Limit, kMaxPoliciesPerCall> limits{};
    for (size_t k = 0; k < n; ++k) {
      Shard& shard = shards[owner[k]];
      slots[k] = shard.find(policies[k].name(), key, hashes[k]);
      states[k] = slots[k] != kNil ? shard.take_state(slots[k]) : algo::fresh_state(policies[k]);
      limits[k] = {&policies[k], &states[k]};
    }
    std::vector<Decision> out;
    out.reserve(n);
    algo::decide_all(std::span(limits.data(), n), now, cost, Op::kAcquire, out);

    // Existing entries first (slot indices stay valid until something is inserted, which may
    // evict), then the new ones.
    for (size_t k = 0; k < n; ++k) {
      if (slots[k] == kNil) continue;
      Shard& shard = shards[owner[k]];
      const int64_t idle_at = algo::idle_at_us(policies[k], states[k]);
      shard.put_state(slots[k], std::move(states[k]), idle_at);
      if (idle_at <= now) {
        shard.remove(slots[k], hashes[k]);
      } else {
        shard.touch(slots[k]);
      }
    }
    for (size_t k = 0; k < n; ++k) {
      if (slots[k] != kNil) continue;
      const int64_t idle_at = algo::idle_at_us(policies[k], states[k]);
      if (idle_at > now) {
        shards[owner[k]].insert(policies[k].name(), key, hashes[k], std::move(states[k]),
                                idle_at, now);
      }
    }
    return out;
  }
};

namespace {

// Cheap inline checks first, so the hot path does not call out for valid input.
Status check_key_and_cost(std::string_view key, int64_t cost) {
  if (key.empty() || key.size() > kMaxKeyLength) return validate_key(key);
  if (cost < 1 || cost > kMaxCost) return validate_cost(cost);
  return {};
}

uint64_t random_seed() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

}  // namespace

MemoryStore::MemoryStore(MemoryStoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->clock = options.clock != nullptr ? options.clock : &SystemClock::instance();
  impl_->seed = random_seed() ^ reinterpret_cast<uintptr_t>(impl_.get());
  const size_t max_keys = std::max<size_t>(options.max_keys, 1);
  size_t shards = std::bit_ceil(std::clamp<size_t>(options.shards, 1, size_t{1} << 16));
  while (shards > max_keys) shards /= 2;  // every shard holds at least one key
  // Slot indices are 32-bit: keep each shard's share below 2^31 by adding shards.
  while (max_keys / shards >= (size_t{1} << 31)) shards *= 2;
  impl_->shard_count = shards;
  impl_->shard_shift = 64 - static_cast<unsigned>(std::countr_zero(shards));
  impl_->shards = std::make_unique<Shard[]>(shards);
  for (size_t k = 0; k < shards; ++k) {
    impl_->shards[k].init(max_keys / shards, impl_->seed, options.sweep_every,
                          options.sweep_batch);
  }
}

MemoryStore::~MemoryStore() = default;

Result<Decision> MemoryStore::acquire(const Policy& policy, std::string_view key, int64_t cost) {
  if (Status s = check_key_and_cost(key, cost); !s.is_ok()) return s;
  return impl_->decide_one(policy, key, cost, Op::kAcquire);
}

Result<Decision> MemoryStore::peek(const Policy& policy, std::string_view key, int64_t cost) {
  if (Status s = check_key_and_cost(key, cost); !s.is_ok()) return s;
  return impl_->decide_one(policy, key, cost, Op::kPeek);
}

Result<std::vector<Decision>> MemoryStore::acquire_all(std::span<const Policy> policies,
                                                       std::string_view key, int64_t cost) {
  if (Status s = validate_acquire_all(policies, key, cost); !s.is_ok()) return s;
  return impl_->decide_all(policies, key, cost);
}

Status MemoryStore::reset(const Policy& policy, std::string_view key) {
  if (Status s = validate_key(key); !s.is_ok()) return s;
  const uint64_t h = impl_->hash(policy, key);
  Shard& shard = impl_->shards[impl_->shard_index(h)];
  std::lock_guard lock(shard.mu);
  const uint32_t i = shard.find(policy.name(), key, h);
  if (i != kNil) shard.remove(i, h);
  return {};
}

void MemoryStore::acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                                DecisionCallback done) {
  done(acquire(policy, key, cost));
}

void MemoryStore::peek_async(const Policy& policy, std::string_view key, int64_t cost,
                             DecisionCallback done) {
  done(peek(policy, key, cost));
}

void MemoryStore::acquire_all_async(std::span<const Policy> policies, std::string_view key,
                                    int64_t cost, DecisionsCallback done) {
  done(acquire_all(policies, key, cost));
}

void MemoryStore::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  done(reset(policy, key));
}

size_t MemoryStore::key_count() const {
  size_t n = 0;
  for (size_t k = 0; k < impl_->shard_count; ++k) n += impl_->shards[k].size();
  return n;
}

uint64_t MemoryStore::evictions() const {
  uint64_t n = 0;
  for (size_t k = 0; k < impl_->shard_count; ++k) n += impl_->shards[k].evictions();
  return n;
}

size_t MemoryStore::sweep() {
  const int64_t now = impl_->clock->now().count();
  size_t dropped = 0;
  for (size_t k = 0; k < impl_->shard_count; ++k) {
    Shard& shard = impl_->shards[k];
    std::lock_guard lock(shard.mu);
    dropped += shard.sweep_all(now);
  }
  return dropped;
}

size_t MemoryStore::capacity() const {
  size_t n = 0;
  for (size_t k = 0; k < impl_->shard_count; ++k) n += impl_->shards[k].capacity();
  return n;
}

}  // namespace ratelimit
