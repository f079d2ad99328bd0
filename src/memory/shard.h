// shard.h — one shard of the MemoryStore: a hash table of compact entries, three recency
// lists (one per standing: what eviction takes first), the byte count, and the incremental
// idle sweep, all guarded by one lock (a spinlock: spin_lock.h says why). Internal to
// src/memory.
//
// Why this shape (and not std::unordered_map<std::string, AlgorithmState> + std::list):
//   - entries live in 64-byte slots in chunked slabs (no per-entry allocation, no pointer
//     chasing through nodes); the table is open addressing with linear probing over 8-byte
//     cells holding 32 bits of the hash and the slot index, so a probe rarely touches a slot
//     that does not match, and deletion is a backward shift (no tombstones);
//   - a slot names its policy by a 16-bit id into the shard's policy table (policy_table.h),
//     so long policy names cost nothing per key, keys of up to 23 bytes are stored inline, and
//     the sweep can ask algo::idle_at_us about any entry without the caller's Policy at hand.
//     An existing key is found in one probe (find_named: key bytes, then the slot's policy
//     entry's name), so the hot path never looks a name up; only a new key does;
//   - per-key state is stored in the slot (16-24 bytes; the sliding log's is its queue's
//     pointer, head and size, the entries on the heap; a concurrency key's is the vector of its
//     leases, 32 bytes per lease on the heap) and decided in place, so the decision
//     math stays in src/core;
//   - idleness is computed only when it can be true: an admitted acquire holds the units it
//     took, so it is never idle; every other touch, the sweep and eviction ask
//     algo::idle_at_us.
// Eviction (issue 12: plain LRU let a flood of invented keys push out a key that was being
// denied, which then started afresh): every entry has a standing from its last acquire —
// roomy (half or more of its limit left), near its limit, or denied — and sits in that
// standing's recency list. A full shard evicts from the lowest standing that has an entry, and
// there, among the kEvictionSample entries nearest the tail, the one that idles soonest
// (already idle: dropped, not counted). So a denied entry goes only when every entry of its
// shard is denied too, and one-request keys (roomy, or near the limit for a limit of 1) never
// push out a denied one. Recency within a list is lazy: an entry is moved to the front only
// when more than a quarter of the shard's capacity worth of operations happened since it was
// last put there (a hot key costs no list writes), or when its standing changes. Stamps are
// 30-bit: an entry untouched for 2^30 operations on its shard may skip one move (order only).
// An entry evicted before it is idle leaves its residue in residue_ (residue_table.h), and a
// key not in the table starts from it (starting_state), so eviction never hands back a limit.
// Bytes: each entry counts kEntryBytes (its slot and its share of the table) plus the heap
// blocks it owns (a key over 23 bytes, the sliding log's queue) as the allocator rounds them;
// the shard keeps the total within its byte share by the same eviction order, never evicting
// the entry being decided (one entry larger than the share is held alone).
// Invariants (with the lock held): size() <= capacity(); bytes() is the sum above over live
// slots and <= byte_share() whenever more than the entries in use are held; every live slot is
// in the table exactly once and in the list of its standing exactly once; every live slot's
// policy id is live with users >= 1; the sweep cursor is kNil or a live slot of list
// cursor_list_; policy ids are only recycled in begin_op, when no operation holds one.
#pragma once

#include <atomic>
#include <cstring>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "key_hash.h"
#include "policy_table.h"
#include "slot.h"
#include "residue_table.h"
#include "snapshot.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "mutex.h"
#include "spin_lock.h"

namespace ratelimit::memory {

class alignas(64) Shard {
 public:
  Shard() = default;
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // The slot tag of a state of algorithm `a`: its index in kAlgorithmTable (policy.h).
  static constexpr uint8_t tag_of(Algorithm a) { return static_cast<uint8_t>(algorithm_index(a)); }

  // Called once before use. capacity >= 1; sweep_every == 0 or sweep_batch == 0 disables the
  // incremental sweep.
  // Runs before the shard is shared (the store's constructor), so it takes no lock.
  void init(size_t capacity, size_t byte_share, uint64_t seed, size_t sweep_every,
            size_t sweep_batch, SaturationChoice when_saturated) RL_NO_THREAD_SAFETY_ANALYSIS;

  SpinLock mu;

  // Everything below requires `mu` held (RL_REQUIRES(mu): -Wthread-safety checks the callers).

  // Counts one operation on the shard, recycles unused policy ids, and runs the incremental
  // sweep when it is due.
  void begin_op(int64_t now_us) RL_REQUIRES(mu) {
    ++ops_;
    if (policies_.purge_due()) policies_.purge();
    if (sweep_every_ != 0 && --sweep_countdown_ == 0) {
      sweep_countdown_ = sweep_every_;
      sweep_some(now_us, sweep_batch_);
    }
  }
  // PolicyTable::id: the id of `policy`'s definition of its meaning (kNoPolicy: none and
  // !create, or the table is full).
  uint16_t policy_id(const Policy& policy, uint64_t name_hash, bool create) RL_REQUIRES(mu) {
    return policies_.id(policy, name_hash, create);
  }
  // The slot holding (policy's name, key) under any definition of the name, or kNil. One
  // table probe, no lookup in the policy table. `hash` is key_hash(name_hash, key).
  uint32_t find_name(const Policy& policy, uint64_t name_hash, std::string_view key,
                     uint64_t hash) const RL_REQUIRES(mu) {
    for (size_t pos = static_cast<uint32_t>(hash) & table_mask_;;) {
      const uint32_t i = next_with_key(pos, key, hash);
      if (i == kNil || policies_.names(slot(i).policy, policy, name_hash)) return i;
    }
  }
  // find_name, and on a hit PolicyTable::match (the stored definition becomes `policy` if
  // only its limit-like parameters changed). `conflict` is set when the slot's state was
  // written under another meaning: the caller answers algo::conflict_decision while that
  // state is live (issue 31). The hot path: a hit under the same parameters costs one
  // comparison more than the probe.
  uint32_t find_named(const Policy& policy, uint64_t name_hash, std::string_view key,
                      uint64_t hash, bool& conflict) RL_REQUIRES(mu) {
    for (size_t pos = static_cast<uint32_t>(hash) & table_mask_;;) {  // find_name's probe
      const uint32_t i = next_with_key(pos, key, hash);
      if (i == kNil) {
        conflict = false;
        return kNil;
      }
      const PolicyTable::Match m = policies_.match(slot(i).policy, policy, name_hash);
      if (m == PolicyTable::Match::kOtherName) continue;
      conflict = m == PolicyTable::Match::kConflict;
      return i;
    }
  }
  // algo::decide on the slot's state, in place (the O(1) states on a local copy of their
  // packed bytes; the log on its in-slot state; a state of another algorithm through the
  // variant). Inline: on the hot path this is a switch and a call to the algorithm.
  Decision decide(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost, algo::Op op)
      RL_REQUIRES(mu) {
    Slot& s = slot(i);
    // A report (algo::report) is off the hot path: through the variant, like a redefinition.
    if (s.tag == tag_of(policy.algorithm()) && op != algo::Op::kReport) {
      using enum Algorithm;
      switch (policy.algorithm()) {
        case kFixedWindow: return decide_packed<kFixedWindow>(s, policy, now_us, cost, op);
        case kSlidingWindowLog: return decide_log(s, policy, now_us, cost, op);
        case kSlidingWindowCounter:
          return decide_packed<kSlidingWindowCounter>(s, policy, now_us, cost, op);
        case kTokenBucket: return decide_packed<kTokenBucket>(s, policy, now_us, cost, op);
        case kLeakyBucket: return decide_packed<kLeakyBucket>(s, policy, now_us, cost, op);
        case kConcurrency: break;  // leases: decide_lease
      }
    }
    return decide_unpacked(i, policy, now_us, cost, op);
  }
  // The state a key not in the table starts from: rebuilt from its eviction residue while one
  // applies (residue_table.h), else fresh. Inline: a store that never evicted a live key
  // checks one pointer.
  algo::AlgorithmState starting_state(const Policy& policy, uint64_t name_hash, uint64_t hash,
                                      int64_t now_us) RL_REQUIRES(mu) {
    algo::Residue r;
    if (residue_.active() && residue_.recall(hash, name_hash, now_us, r)) {
      return algo::state_from_residue(policy, r, now_us);
    }
    return algo::fresh_state(policy);
  }
  // Forgets the key's own eviction residue (reset).
  void forget_residue(uint64_t hash, uint64_t name_hash) RL_REQUIRES(mu) {
    residue_.forget(hash, name_hash);
  }
  // algo::decide with a lease id (concurrency policies), on the slot's state moved out and back.
  Decision decide_lease(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost,
                        algo::Op op, const LeaseId& lease, const adaptive::ReleaseReport& report)
      RL_REQUIRES(mu);
  // Moves the slot's state out (the slot keeps a placeholder until put_state).
  algo::AlgorithmState take_state(uint32_t i) RL_REQUIRES(mu);
  // Stores a state back into the slot.
  void put_state(uint32_t i, algo::AlgorithmState&& state) RL_REQUIRES(mu);
  // put_state's states that own heap memory (the sliding log, the leases): moved into the slot,
  // reusing the one already there, and their bytes counted. A member, not a lambda, so that
  // -Wthread-safety sees `mu` held.
  template <typename T>
  void put_heap_state(Slot& s, uint8_t tag, T&& state) RL_REQUIRES(mu);
  // algo::idle_at_us of the slot's state under its policy's current definition.
  int64_t idle_at(uint32_t i) RL_REQUIRES(mu);
  // Records an acquire that left the entry at `standing`: moves it to the front of that
  // standing's list when its standing changed or it is not among the most recent quarter
  // (inline: on a hot key it is two comparisons).
  void touch(uint32_t i, uint32_t standing) RL_REQUIRES(mu) {
    const uint32_t stamp = slot(i).stamp;
    if ((stamp >> kStandingShift) == standing &&
        (i == lists_[standing].head || ((ops_ - stamp) & kStampMask) <= mtf_distance_)) {
      return;
    }
    move_to_front(i, standing);
  }
  uint32_t standing(uint32_t i) const RL_REQUIRES(mu) { return slot(i).stamp >> kStandingShift; }
  // Forgets the slot (hash: the one it was found or inserted with).
  void remove(uint32_t i, uint64_t hash) RL_REQUIRES(mu);
  // Adds a new entry standing at `standing` (precondition: find_name() == kNil; `policy` from
  // policy_id(..., true); `state` from starting_state() and decided), first evicting (eviction
  // order above; an evicted entry that was not idle leaves its residue) until one more key and
  // its bytes fit; entries listed in `keep` (slots of this shard in use by the caller) stay.
  // The key's own residue, now folded into its state, is forgotten. Returns the new slot.
  uint32_t insert(uint16_t policy, std::string_view key, uint64_t hash,
                  algo::AlgorithmState&& state, uint32_t standing, int64_t now_us,
                  std::span<const uint32_t> keep = {}) RL_REQUIRES(mu);
  // True when the entries hold more bytes than the share (a sliding log grew).
  bool over_byte_share() const RL_REQUIRES(mu) { return bytes_ > byte_share_; }
  // Evicts (eviction order above, sparing `keep`) until within the byte share or only `keep`
  // is left.
  void shed_bytes(std::span<const uint32_t> keep, int64_t now_us) RL_REQUIRES(mu) {
    make_room(0, 0, keep, now_us);
  }
  // Drops every idle entry; returns how many.
  size_t sweep_all(int64_t now_us) RL_REQUIRES(mu);
  // Snapshots (shard_snapshot.cc): every entry not idle at now, each list oldest first; and one
  // entry read back (false, nothing changed, when the key is held or the policy table is full).
  void save_entries(SnapshotWriter& out, int64_t now_us) RL_REQUIRES(mu);
  bool restore(const Policy& policy, uint64_t name_hash, std::string_view key, uint64_t hash,
               algo::AlgorithmState&& state, uint32_t standing, int64_t now_us) RL_REQUIRES(mu);

  // Readable without the lock (relaxed; approximate while others work).
  size_t size() const { return size_mirror_.load(std::memory_order_relaxed); }
  size_t bytes() const { return bytes_mirror_.load(std::memory_order_relaxed); }
  // Evictions by the standing of the entry evicted, and how many were for the byte share.
  uint64_t evicted(uint32_t standing) const {
    return evicted_[standing].load(std::memory_order_relaxed);
  }
  uint64_t evicted_for_bytes() const { return evicted_for_bytes_.load(std::memory_order_relaxed); }
  // Bytes of the residue table (0 until the first live key is evicted), and how many
  // restrictive residues found their bucket of marks full: folded into a saturation mark, or
  // dropped (residue_table.h).
  size_t residue_bytes() const { return residue_bytes_mirror_.load(std::memory_order_relaxed); }
  uint64_t residue_saturated() const { return residue_saturated_.load(std::memory_order_relaxed); }
  uint64_t residue_dropped() const { return residue_dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }
  size_t byte_share() const { return byte_share_; }

 private:
  static constexpr unsigned kChunkBits = 6;  // 64 slots (4 KiB) per slab chunk: little slack
  static constexpr uint32_t kChunkMask = (1U << kChunkBits) - 1;
  static constexpr unsigned kStandingShift = 30;
  static constexpr uint32_t kStampMask = (1U << kStandingShift) - 1;

  struct List {
    uint32_t head = kNil;  // most recently put in front
    uint32_t tail = kNil;  // least recently
  };

  // algo::decide on algorithm A's state where it lies in the slot (put there by memcpy, which
  // begins the life of a trivially copyable object: slot_state.h). Not on a local copy: copying
  // the state back as one 16-byte load right after decide wrote it field by field stalled on
  // store forwarding (~4 ns of a hot-key decision, issue 34).
  template <Algorithm A>
  static Decision decide_packed(Slot& s, const Policy& policy, int64_t now_us, int64_t cost,
                                algo::Op op) {
    return algo::decide(policy, *std::launder(reinterpret_cast<algo::StateOfT<A>*>(s.state)),
                        now_us, cost, op);
  }
  // The sliding log on its in-slot state (keeps the byte count).
  Decision decide_log(Slot& s, const Policy& policy, int64_t now_us, int64_t cost, algo::Op op)
      RL_REQUIRES(mu);
  // The rest: a state of another algorithm (a redefined policy).
  Decision decide_unpacked(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost,
                           algo::Op op) RL_REQUIRES(mu);

  Slot& slot(uint32_t i) RL_REQUIRES(mu) { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  const Slot& slot(uint32_t i) const RL_REQUIRES(mu) { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  static const char* key_bytes(const Slot& s) {
    if (s.key_len <= kInlineKeyBytes) return s.key;
    const char* p;
    std::memcpy(&p, s.key, sizeof p);
    return p;
  }
  // The table probe of find_name(): from table position `pos` on, the next
  // slot whose key is `key` (under any policy), with `pos` left just past it; kNil at the
  // first empty cell (the end of `hash`'s probe run). Start with pos = (uint32_t)hash & table_mask_.
  uint32_t next_with_key(size_t& pos, std::string_view key, uint64_t hash) const RL_REQUIRES(mu) {
    const auto h32 = static_cast<uint32_t>(hash);
    for (;; pos = (pos + 1) & table_mask_) {
      const uint64_t cell = table_[pos];
      if (cell == 0) return kNil;
      if (static_cast<uint32_t>(cell >> 32) != h32) continue;
      const auto i = static_cast<uint32_t>(cell) - 1;
      const Slot& s = slot(i);
      if (s.key_len != key.size() || !same_bytes(key_bytes(s), key.data(), key.size())) continue;
      pos = (pos + 1) & table_mask_;
      return i;
    }
  }
  uint64_t rehash(const Slot& s) const RL_REQUIRES(mu);

  void sweep_some(int64_t now_us, size_t n) RL_REQUIRES(mu);
  void set_size(size_t n) RL_REQUIRES(mu) {
    size_ = n;
    size_mirror_.store(n, std::memory_order_relaxed);
  }
  void add_bytes(size_t n) RL_REQUIRES(mu) { set_bytes(bytes_ + n); }
  void sub_bytes(size_t n) RL_REQUIRES(mu) { set_bytes(bytes_ - n); }
  void set_bytes(size_t n) RL_REQUIRES(mu) {
    bytes_ = n;
    bytes_mirror_.store(n, std::memory_order_relaxed);
  }
  // Heap bytes of the slot's log queue, as the allocator rounds them (0 for other states).
  size_t log_bytes(const Slot& s) const RL_REQUIRES(mu);
  // Frees what the slot's state owns (the sliding log's queue), keeping the byte count.
  void free_state(Slot& s) RL_REQUIRES(mu);

  // Eviction.
  // Remembers a live entry about to be evicted (residue_table.h).
  void record_residue(uint32_t i, int64_t now_us) RL_REQUIRES(mu);
  // Evicts until size() + keys <= capacity() and bytes() + bytes <= byte_share(). `keep` is
  // spared for the byte share, and for the key bound unless nothing else is left.
  void make_room(size_t keys, size_t bytes, std::span<const uint32_t> keep, int64_t now_us)
      RL_REQUIRES(mu);
  // The entry eviction takes next, sparing `keep` (kNil if none); `idle_at` receives its
  // idle time.
  uint32_t pick_victim(std::span<const uint32_t> keep, int64_t now_us, int64_t& idle_at)
      RL_REQUIRES(mu);

  // Slab.
  uint32_t allocate() RL_REQUIRES(mu);
  void release(uint32_t i) RL_REQUIRES(mu);
  // Standing lists.
  void move_to_front(uint32_t i, uint32_t standing) RL_REQUIRES(mu);
  void push_front(uint32_t i, uint32_t standing) RL_REQUIRES(mu);
  void unlink(uint32_t i) RL_REQUIRES(mu);
  // Table.
  void table_insert(uint64_t hash, uint32_t i) RL_REQUIRES(mu);
  void table_erase(uint64_t hash, uint32_t i) RL_REQUIRES(mu);
  void grow_table() RL_REQUIRES(mu);

  // Set by init() before the shard is shared; read-only after.
  size_t capacity_ = 1;
  size_t byte_share_ = 0;
  uint64_t seed_ = 0;
  uint32_t sweep_every_ = 0;
  uint32_t sweep_batch_ = 0;
  uint32_t mtf_distance_ = 0;  // capacity / 4: see the recency note at the top

  uint32_t sweep_countdown_ RL_GUARDED_BY(mu) = 0;
  uint32_t ops_ RL_GUARDED_BY(mu) = 0;  // wraps; only differences (mod 2^30) are used
  size_t size_ RL_GUARDED_BY(mu) = 0;
  size_t bytes_ RL_GUARDED_BY(mu) = 0;

  std::vector<std::unique_ptr<Slot[]>> chunks_ RL_GUARDED_BY(mu);
  // Slots ever handed out (the rest of the last chunk is untouched).
  uint32_t slots_used_ RL_GUARDED_BY(mu) = 0;
  uint32_t free_ RL_GUARDED_BY(mu) = kNil;  // free-list head

  List lists_[kStandings] RL_GUARDED_BY(mu);
  // Incremental sweep position, walking each list from tail to head, one list after the other.
  uint32_t cursor_ RL_GUARDED_BY(mu) = kNil;
  uint32_t cursor_list_ RL_GUARDED_BY(mu) = kStandings - 1;

  // (hash low 32 bits << 32) | (slot + 1); 0 = empty.
  std::unique_ptr<uint64_t[]> table_ RL_GUARDED_BY(mu);
  size_t table_mask_ RL_GUARDED_BY(mu) = 0;

  PolicyTable policies_ RL_GUARDED_BY(mu);

  std::atomic<size_t> size_mirror_{0};
  std::atomic<size_t> bytes_mirror_{0};
  std::atomic<uint64_t> evicted_[kStandings] = {};
  std::atomic<uint64_t> evicted_for_bytes_{0};
  ResidueTable residue_ RL_GUARDED_BY(mu);
  std::atomic<size_t> residue_bytes_mirror_{0};
  std::atomic<uint64_t> residue_saturated_{0};
  std::atomic<uint64_t> residue_dropped_{0};
};

}  // namespace ratelimit::memory
