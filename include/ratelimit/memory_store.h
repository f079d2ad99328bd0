// memory_store.h — the embedded, in-process store (the default).
//
// Why: most services need a limiter that costs a few tens of nanoseconds and no network hop.
// Design: the key space is split over shards (a power of two), each a hash table under its own
// lock (a spin lock with backoff: the critical section is tens of ns), so threads on
// different keys rarely meet; every decision runs the core
// algorithm (algorithms.h) under the shard lock, which makes check-and-consume atomic.
// State is namespaced by policy name: (policy name, key) is the identity of an entry.
// Invariants:
//   - at most options.max_keys entries in total (each shard holds at most its share,
//     max_keys / shards), and at most options.max_bytes counted bytes (each shard its share,
//     max_bytes / shards; the one entry being decided is never evicted for bytes, so a single
//     entry larger than a shard's share is held alone in its shard);
//   - eviction takes the entry that restricts least. Each entry has a standing from its last
//     acquire: roomy (half or more of its limit left), near its limit (less than half), or
//     denied (refused over its limit; a cost above the whole capacity does not count). A full
//     shard evicts from the lowest standing it holds, and within it, among the 4 entries used
//     least recently, the one that would become idle soonest. So a key being denied is evicted
//     only when every entry of its shard is denied too: a flood of invented one-request keys
//     cannot free it (issue 12). Recency is tracked lazily (an entry is moved to the front of
//     its standing's list when its standing changes or when it is not among the most recent
//     quarter), so an entry used within the last 3/4 * share operations on its shard is never
//     among the least recently used of its standing;
//   - an entry whose state is back to fresh (algo::idle_at_us <= now) is dropped when it is
//     next touched, by the incremental sweep (options.sweep_batch entries every
//     options.sweep_every operations per shard, cycling through the shard), and by sweep(),
//     and is taken first when room is needed (not counted as an eviction);
//   - peek never creates an entry and does not count as a use for eviction order or standing;
//   - thread-safe; no global lock on the hot path. acquire_all locks the shards it involves in
//     ascending index order, so concurrent calls cannot deadlock.
// An evicted key comes back no richer than it left (issue 23): a key evicted before it is idle
// leaves a residue (algo::residue_of, 24 bytes) in its shard's residue table, and a new entry for
// it starts from algo::state_from_residue. A restrictive key (near its limit or denied) whose
// cell another restrictive key holds leaves an 8-byte mark of its own (key fingerprint, policy,
// idle time) instead, and comes back fully used until that time. A key near its limit or
// denied gets back nothing while the marks have room, and whatever the flood under
// SaturationChoice::kRefuse; a roomy key gets back nothing while its residue is held, at most
// the units it had used (under half its limit) when a restrictive residue took its cell. A
// flood on one policy does not refuse another policy's new keys (issue 33: merged cells did).
// Past the marks' room (8 per bucket, half a bucket per key of capacity: a flood of about 3 x
// max_keys keys at their limit within one window fits), options.when_saturated chooses between
// refusing the flooded policy's new keys that hash to a full bucket and forgetting a mark
// (counted in eviction_counts()). See docs/design.md for the bounds and measured rates, and
// residue_bytes() for the size (12-24 bytes per key of capacity for the cells, allocated at the
// first such eviction; 32-64 more for the marks, at the first overflow).
// Memory: one 64-byte slot per key (state, list links, policy id, and the key itself when it
// is at most 23 bytes; a longer key takes one extra heap block), plus 8-byte hash table cells
// at a load of 3/8 ... 3/4: 72-90 bytes per key in all (measured: 81 bytes per key over
// 1,000,000 keys, docs/BENCHMARKS.md). Policy names are stored once per shard, not per key.
// The sliding log keeps its queue on the heap: one block of 8 + 16 * capacity bytes, the
// capacity between n and 2n + 2 for n admitted requests in the window (at most
// kMaxSlidingLogLimit; 9 times that in debt, after reports); bytes() counts it as the allocator
// rounds it, so max_bytes bounds a log in debt too.
// Policies: the shard remembers the latest definition seen under each name (to compute
// idleness); redefining a policy's parameters under the same name applies to existing keys,
// and a key may be dropped at the idle time the definition its shard last saw implies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ratelimit/clock.h"
#include "ratelimit/store.h"

namespace ratelimit {

// What a shard does when a restrictive key's residue finds its bucket of marks full (a flood of
// keys at their limit beyond the residue table's room; memory_store.h top, docs/design.md).
enum class SaturationChoice {
  // Never forget a restrictive residue: the policy's marks in that bucket fold into one that
  // refuses every new key of that policy hashing there until the latest idle time (about
  // 1/buckets of the policy's new keys per folded bucket). Counted: residue_saturated.
  kRefuse,
  // Forget the mark that idles soonest: that key may be admitted its limit again; no new key is
  // refused. Counted: residue_dropped.
  kAdmit,
};

struct MemoryStoreOptions {
  // Upper bound on keys held (all policies together). Default: 1,000,000.
  size_t max_keys = 1'000'000;
  // Number of shards, rounded up to a power of two. Default: 64.
  size_t shards = 64;
  // Time source; nullptr means SystemClock::instance(). Not owned; must outlive the store.
  const Clock* clock = nullptr;
  // Incremental sweep: every `sweep_every` operations on a shard, `sweep_batch` entries of
  // that shard are checked for idleness (continuing where the previous check stopped).
  // 0 for either disables the incremental sweep (sweep() and drop-on-touch remain).
  size_t sweep_every = 16;
  size_t sweep_batch = 2;
  // Upper bound on the bytes the entries take (bytes(): slots, table share, long keys, sliding
  // log queues), all policies together. Default: 256 MiB (1,000,000 O(1) keys take ~80 MB;
  // without it, 1,000,000 sliding logs at limit 500 could take 16 GB). Last, so positional
  // initialisers written before it existed keep their meaning.
  size_t max_bytes = size_t{256} << 20;
  // When a flood of keys at their limit saturates the residue table (above). Default: refuse.
  SaturationChoice when_saturated = SaturationChoice::kRefuse;
};

// Evictions since construction, by the standing of the entry evicted (see the top of this
// file). An entry that was already idle when it made room is not an eviction.
struct MemoryStoreEvictions {
  uint64_t roomy = 0;       // half or more of its limit left
  uint64_t near_limit = 0;  // admitted, less than half of its limit left
  uint64_t denied = 0;      // its last acquire was denied
  uint64_t for_bytes = 0;   // of all the above, those the byte bound required (not the key bound)
  // Not evictions: restrictive residues (keys evicted near their limit or denied) that found
  // their bucket of marks full. Saturated (kRefuse): folded into their policy's saturation mark,
  // which refuses that policy's new keys hashing to the bucket until its idle time. Dropped
  // (kAdmit, or a bucket holding eight policies' marks): forgotten, that key may be admitted its
  // limit again. Either growing means a flood larger than max_keys can absorb.
  uint64_t residue_saturated = 0;
  uint64_t residue_dropped = 0;
  uint64_t total() const { return roomy + near_limit + denied; }
};

// What MemoryStore::save wrote or load read.
struct MemorySnapshotStats {
  size_t keys = 0;          // keys written / added
  size_t policies = 0;      // policy definitions in the file
  size_t bytes = 0;         // file size
  size_t skipped_idle = 0;  // load: keys idle by now
  size_t skipped_held = 0;  // load: keys the store already held
  int64_t saved_at_us = 0;  // the store clock's time when the file was written
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;

  // The door (store.h). The work is synchronous: every completion is called inline, on the
  // calling thread, before the call returns. Errors: kInvalidArgument for an empty or
  // oversized key, a cost outside 1 ... kMaxCost, or a bad op list. kAllOrNothing: atomic
  // across every key (the shards involved are locked together). kIndependent: decided one after
  // the other on the calling thread. kResourceExhausted when a shard's policy table is full
  // (65,534 names): in kIndependent mode the ops before the failing one have been decided.
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;

  // The same decisions without a completion object, for callers holding a MemoryStore (the
  // micro-benchmarks, embedders): they hide Store's wrappers of the same names, which reach the
  // same code through the door. Called through a Store&, the wrappers answer alike.
  Result<Decision> acquire(const Policy& policy, std::string_view key, int64_t cost = 1);
  Result<Decision> peek(const Policy& policy, std::string_view key, int64_t cost = 1);
  Result<std::vector<Decision>> acquire_all(std::span<const Policy> policies,
                                            std::string_view key, int64_t cost = 1);
  Status reset(const Policy& policy, std::string_view key);

  // Entries currently held (approximate while other threads are working). Thread-safe.
  size_t key_count() const;
  // Entries evicted because a bound was reached, since construction (an entry that was
  // already idle when it made room is not counted): eviction_counts().total(). Thread-safe.
  uint64_t evictions() const;
  // The same, by the standing of the entry evicted. Thread-safe (each counter is read
  // separately: approximate while other threads are working).
  MemoryStoreEvictions eviction_counts() const;
  // Bytes the entries take, as counted for max_bytes. Thread-safe, approximate like key_count.
  size_t bytes() const;
  // Bytes of the eviction residue tables (not part of bytes() or max_bytes): 0 until a key is
  // evicted before it was idle, then 24 bytes per cell, half a cell per key of capacity (at
  // least 16 cells per shard, rounded up to a power of two); once a restrictive residue finds
  // its cell taken, 64 more per bucket of 8 marks, half a bucket per key of capacity (at least
  // 2 per shard, rounded up likewise). Thread-safe.
  size_t residue_bytes() const;
  // Whether (policy's name, key) has an entry now — not merely an eviction residue, which
  // decides like the entry it stands for (for tests and diagnostics; a peek cannot tell).
  // Thread-safe; locks one shard.
  bool holds(const Policy& policy, std::string_view key);
  // The byte bound actually enforced: shards * (max_bytes / shards) <= max_bytes.
  size_t byte_capacity() const;
  // Drops every idle entry now (normally done incrementally). Returns how many were dropped.
  // Thread-safe; locks one shard at a time.
  size_t sweep();
  // The bound actually enforced: shards * (max_keys / shards) <= max_keys, after the shard
  // count was rounded to a power of two (and lowered when max_keys < shards).
  size_t capacity() const;
  // Snapshots (issue 33: a restart gave every client a fresh limit). save() writes every key
  // not idle now — its state, standing and its policy's definition — to `path` atomically
  // (path.tmp, fsync, rename, fsync of the directory: `path` is the old file or the new one,
  // whole), one shard at a time under that shard's lock (so a snapshot is consistent per
  // shard, and deciding goes on meanwhile). load() reads a whole file, checks it (magic,
  // format version, byte order, checksum, every record) before changing anything, and adds each
  // key not idle by now and not held already, under the definition it was saved with: the
  // first decision under the current definition applies that, as a reload does. Eviction
  // residues are not saved. Errors: save, kUnavailable (the file system's message); load,
  // kNotFound (no file), kInvalidArgument ("snapshot refused: ...": truncated, damaged,
  // another version or not a snapshot — nothing applied), kUnavailable (cannot read).
  // Thread-safe; load is meant for a store not yet serving. Time and size: docs/BENCHMARKS.md.
  Result<MemorySnapshotStats> save(const std::string& path) const;
  Result<MemorySnapshotStats> load(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit
