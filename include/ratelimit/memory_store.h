// memory_store.h — the embedded, in-process store (the default).
//
// Why: most services need a limiter that costs a few tens of nanoseconds and no network hop.
// Design: the key space is split over shards (a power of two), each a hash map under its own
// mutex, so threads working on different keys rarely meet; every decision runs the core
// algorithm (algorithms.h) under the shard lock, which makes check-and-consume atomic.
// Invariants:
//   - at most options.max_keys entries in total (each shard holds at most its share); when a
//     shard is full the least recently used entry of that shard is evicted first;
//   - an entry whose state is back to fresh (idle) is dropped when it is next touched, or by
//     the sweep that runs every options.sweep_every decisions per shard;
//   - thread-safe; no global lock on the hot path. acquire_all locks the shards it involves in
//     ascending index order, so concurrent calls cannot deadlock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ratelimit/clock.h"
#include "ratelimit/store.h"

namespace ratelimit {

struct MemoryStoreOptions {
  // Upper bound on keys held (all policies together). Default: 1,000,000.
  size_t max_keys = 1'000'000;
  // Number of shards, rounded up to a power of two. Default: 64.
  size_t shards = 64;
  // Time source; nullptr means SystemClock::instance(). Not owned; must outlive the store.
  const Clock* clock = nullptr;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  void acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                     DecisionCallback done) override;
  void peek_async(const Policy& policy, std::string_view key, int64_t cost,
                  DecisionCallback done) override;
  void acquire_all_async(std::span<const Policy> policies, std::string_view key, int64_t cost,
                         DecisionsCallback done) override;
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;

  // Synchronous: no completion object is created on these paths.
  Result<Decision> acquire(const Policy& policy, std::string_view key, int64_t cost = 1) override;
  Result<Decision> peek(const Policy& policy, std::string_view key, int64_t cost = 1) override;
  Result<std::vector<Decision>> acquire_all(std::span<const Policy> policies,
                                            std::string_view key, int64_t cost = 1) override;
  Status reset(const Policy& policy, std::string_view key) override;

  // Entries currently held (approximate while other threads are working).
  size_t key_count() const;
  // Entries evicted because the key bound was reached, since construction.
  uint64_t evictions() const;
  // Drops every idle entry now (normally done incrementally). Returns how many were dropped.
  size_t sweep();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit
