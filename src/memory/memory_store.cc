// memory_store.cc — MemoryStore: routes each (policy name, key) to a shard by hash, and runs
// the core algorithm on its state under that shard's lock (see memory_store.h, shard.h). This
// file is the public surface (input checks, async adapters, counts, snapshots); the paths under
// the shard locks are MemoryStore::Impl's, in memory_store_impl.h.
//
// Invariants: the clock is read once per call, before any lock is taken; every decision is
// algo::decide / algo::decide_all from src/core; a peek never creates an entry; an entry whose
// state is idle after a decision is dropped at once (or never created); acquire_all and an
// all-or-nothing decide_many take their shard locks in ascending index order and write back
// only after all decisions are made.
#include "ratelimit/memory_store.h"

#include <algorithm>
#include <array>
#include <bit>
#include <mutex>
#include <random>
#include <utility>

#include "memory_store_impl.h"
#include "snapshot.h"

namespace ratelimit {

namespace {

// The common input, checked inline: a key and a cost within bounds need nothing more (the hot
// path then builds no Status); anything else goes through check_key_and_cost.
bool plain_key_and_cost(std::string_view key, int64_t cost) {
  return !key.empty() && key.size() <= kMaxKeyLength && cost >= 1 && cost <= kMaxCost;
}

Status check_key_and_cost(const Policy& policy, std::string_view key, int64_t cost, Op op) {
  if (key.empty() || key.size() > kMaxKeyLength) return validate_key(key);
  if (cost < 1 || cost > kMaxCost) {
    if (is_state_peek(policy, op == Op::kPeek, cost)) return {};  // the state as it is (state_peek.h)
    return validate_cost(policy, cost);
  }
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
    impl_->shards[k].init(max_keys / shards, options.max_bytes / shards, impl_->seed,
                          options.sweep_every, options.sweep_batch, options.when_saturated);
  }
}

MemoryStore::~MemoryStore() = default;

Result<Decision> MemoryStore::acquire(const Policy& policy, std::string_view key, int64_t cost) {
  if (!plain_key_and_cost(key, cost)) [[unlikely]] {
    if (Status s = check_key_and_cost(policy, key, cost, Op::kAcquire); !s.is_ok()) return s;
  }
  return impl_->decide_one(policy, key, cost, Op::kAcquire);
}


Result<Decision> MemoryStore::peek(const Policy& policy, std::string_view key, int64_t cost) {
  if (!plain_key_and_cost(key, cost)) [[unlikely]] {
    if (Status s = check_key_and_cost(policy, key, cost, Op::kPeek); !s.is_ok()) return s;
  }
  return impl_->decide_one(policy, key, cost, Op::kPeek);
}

Result<std::vector<Decision>> MemoryStore::acquire_all(std::span<const Policy> policies,
                                                       std::string_view key, int64_t cost) {
  if (Status s = validate_acquire_all(policies, key, cost); !s.is_ok()) return s;
  std::array<StoreOp, kMaxPoliciesPerCall> ops;
  for (size_t k = 0; k < policies.size(); ++k) ops[k] = {&policies[k], key, cost, StoreOp::Kind::kAcquire};
  std::vector<Decision> out;
  if (Status s = impl_->decide_all(std::span(ops.data(), policies.size()), out); !s.is_ok()) return s;
  return out;
}

Status MemoryStore::reset(const Policy& policy, std::string_view key) {
  if (Status s = validate_key(key); !s.is_ok()) return s;
  const Impl::Where w = impl_->locate(policy, key);
  Shard& shard = impl_->shards[w.shard];
  ScopedLock lock(shard.mu);
  const uint32_t i = shard.find_name(policy, w.name_hash, key, w.hash);  // under any meaning
  if (i != kNil) shard.remove(i, w.hash);
  shard.forget_residue(w.hash, w.name_hash);
  return {};
}

void MemoryStore::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                    OpsCallback done) {
  if (Status s = validate_decide_many(ops, atomicity); !s.is_ok()) return done(s);
  if (atomicity == Atomicity::kAllOrNothing && ops.size() > 1) {
    std::vector<Decision> out;
    if (Status s = impl_->decide_all(ops, out); !s.is_ok()) return done(s);
    return done(std::span<const Decision>(out));
  }
  // Independent: one after the other. A single op (the common case) needs no buffer at all.
  auto one = [&](const StoreOp& op) {
    return impl_->decide_one(*op.policy, op.key, op.cost, algo::op_of(op.kind), op.lease, op.report);
  };
  if (ops.size() == 1) {
    auto d = one(ops[0]);
    if (!d) return done(d.status());
    return done(std::span<const Decision>(&*d, 1));
  }
  std::vector<Decision> out;
  out.reserve(ops.size());
  for (const StoreOp& op : ops) {
    auto d = one(op);
    if (!d) return done(d.status());  // a policy table full: the ops before it were decided
    out.push_back(*d);
  }
  done(std::span<const Decision>(out));
}

void MemoryStore::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  done(reset(policy, key));
}

size_t MemoryStore::key_count() const { return impl_->sum(&Shard::size); }

uint64_t MemoryStore::evictions() const { return eviction_counts().total(); }

MemoryStoreEvictions MemoryStore::eviction_counts() const {
  MemoryStoreEvictions e;
  for (size_t k = 0; k < impl_->shard_count; ++k) {
    const Shard& shard = impl_->shards[k];
    e.roomy += shard.evicted(memory::kRoomy);
    e.near_limit += shard.evicted(memory::kNearLimit);
    e.denied += shard.evicted(memory::kDenied);
    e.for_bytes += shard.evicted_for_bytes();
    e.residue_saturated += shard.residue_saturated();
    e.residue_dropped += shard.residue_dropped();
  }
  return e;
}

size_t MemoryStore::bytes() const { return impl_->sum(&Shard::bytes); }

size_t MemoryStore::residue_bytes() const { return impl_->sum(&Shard::residue_bytes); }

bool MemoryStore::holds(const Policy& policy, std::string_view key) {
  if (!validate_key(key).is_ok()) return false;
  const Impl::Where w = impl_->locate(policy, key);
  Shard& shard = impl_->shards[w.shard];
  ScopedLock lock(shard.mu);
  return shard.find_name(policy, w.name_hash, key, w.hash) != kNil;
}

size_t MemoryStore::byte_capacity() const { return impl_->sum(&Shard::byte_share); }

size_t MemoryStore::sweep() {
  const int64_t now = impl_->clock->now().count();
  size_t dropped = 0;
  for (size_t k = 0; k < impl_->shard_count; ++k) {
    Shard& shard = impl_->shards[k];
    ScopedLock lock(shard.mu);
    dropped += shard.sweep_all(now);
  }
  return dropped;
}

size_t MemoryStore::capacity() const { return impl_->sum(&Shard::capacity); }

Result<MemorySnapshotStats> MemoryStore::save(const std::string& path) const {
  const int64_t now = impl_->clock->now().count();
  memory::SnapshotWriter w(now);
  for (size_t k = 0; k < impl_->shard_count; ++k) {
    Shard& shard = impl_->shards[k];
    ScopedLock lock(shard.mu);
    shard.save_entries(w, now);
  }
  MemorySnapshotStats st{w.entries(), w.policies(), 0, 0, 0, now};
  const std::string bytes = w.finish();
  st.bytes = bytes.size();
  if (Status s = memory::write_file_atomically(path, bytes); !s.is_ok()) return s;
  return st;
}

Result<MemorySnapshotStats> MemoryStore::load(const std::string& path) {
  // A file larger than twice what the store may hold, plus slack, is not one it wrote.
  auto bytes = memory::read_whole_file(path, 2 * byte_capacity() + (size_t{64} << 20));
  if (!bytes.ok()) return bytes.status();
  auto c = memory::parse_snapshot(*bytes);
  if (!c.ok()) return c.status();
  MemorySnapshotStats st{0, c->policies.size(), bytes->size(), 0, 0, c->saved_at_us};
  const int64_t now = impl_->clock->now().count();
  for (memory::SnapshotEntry& e : c->entries) {
    const Policy& policy = c->policies[e.policy];
    if (algo::idle_at_us(policy, e.state) <= now) {
      ++st.skipped_idle;
      continue;
    }
    const Impl::Where w = impl_->locate(policy, e.key);
    Shard& shard = impl_->shards[w.shard];
    ScopedLock lock(shard.mu);
    const bool added = shard.restore(policy, w.name_hash, e.key, w.hash, std::move(e.state), e.standing, now);
    ++(added ? st.keys : st.skipped_held);
  }
  return st;
}

}  // namespace ratelimit
