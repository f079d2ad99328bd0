// shard.h — one shard of the MemoryStore: a hash table of compact entries, an LRU list, and
// the incremental idle sweep, all guarded by one mutex. Internal to src/memory.
//
// Why this shape (and not std::unordered_map<std::string, AlgorithmState> + std::list):
//   - entries live in 64-byte slots in chunked slabs (no per-entry allocation, no pointer
//     chasing through nodes); the table is open addressing with linear probing over 8-byte
//     cells holding 32 bits of the hash and the slot index, so a probe rarely touches a slot
//     that does not match, and deletion is a backward shift (no tombstones);
//   - a slot names its policy by a 16-bit id into the shard's policy table (the latest
//     definition seen under each name, with a count of the slots using it), so long policy
//     names cost nothing per key, keys of up to 23 bytes are stored inline, and the sweep can
//     ask algo::idle_at_us about any entry without the caller's Policy at hand;
//   - per-key state is stored packed (16-24 bytes; the sliding log's queue on the heap) and
//     unpacked into an algo::AlgorithmState around each algo::decide call, so the decision
//     math stays in src/core and a redefined policy's state is replaced there;
//   - idleness is computed only when it can be true: an admitted acquire holds the units it
//     took, so it is never idle; every other touch, the sweep and eviction ask
//     algo::idle_at_us;
//   - LRU order is a doubly linked list of slot indices, but an entry is moved to the front
//     only when more than a quarter of the shard's capacity worth of operations happened since
//     it was last put there: a hot key costs no list writes, and an entry touched within the
//     last 3/4 * capacity operations is never at the tail (each operation puts at most one
//     entry in front of it). Stamps are 32-bit: an entry untouched for 2^32 operations on its
//     shard may skip one move (harmless: order only, never the bound).
// Invariants (with the mutex held): size() <= capacity(); every live slot is in the table
// exactly once and in the list exactly once; every live slot's policy id is live with users
// >= 1; the sweep cursor is kNil or a live slot; policy ids are only recycled in begin_op,
// when no operation holds one.
#pragma once

#include <atomic>
#include <cstring>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"

namespace ratelimit::memory {

inline constexpr uint32_t kNil = 0xffffffffU;

inline constexpr uint16_t kNoPolicy = 0xffff;
inline constexpr size_t kInlineKeyBytes = 23;

// One key's entry: exactly one cache line.
struct Slot {
  alignas(8) unsigned char state[24];  // packed state; see take_state()/put_state()
  uint32_t prev;                       // list neighbour toward the head (more recent)
  uint32_t next;                       // toward the tail; the free-list link when free
  uint32_t stamp;                      // shard operation count when last moved to the front
  uint16_t policy;                     // id in the shard's policy table
  uint16_t key_len;
  uint8_t tag;                         // AlgorithmState index of `state`
  char key[kInlineKeyBytes];           // key_len <= 23: the key; else a char* (new char[])
};
static_assert(sizeof(Slot) == 64, "a slot is one cache line");

class alignas(64) Shard {
 public:
  Shard() = default;
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Called once before use. capacity >= 1; sweep_every == 0 or sweep_batch == 0 disables the
  // incremental sweep.
  void init(size_t capacity, uint64_t seed, size_t sweep_every, size_t sweep_batch);

  std::mutex mu;

  // Everything below requires `mu` held.

  // Counts one operation on the shard, recycles unused policy ids, and runs the incremental
  // sweep when it is due.
  void begin_op(int64_t now_us) {
    ++ops_;
    if (policies_dead_ > kPolicyPurgeThreshold) purge_policies();
    if (sweep_every_ != 0 && --sweep_countdown_ == 0) {
      sweep_countdown_ = sweep_every_;
      sweep_some(now_us, sweep_batch_);
    }
  }
  // The id of the policy named like `policy` (whose name hashes to `name_hash`), updating the
  // stored definition if it changed; kNoPolicy if unknown and !create, or if the table is
  // full (65,535 names in use in this shard).
  uint16_t policy_id(const Policy& policy, uint64_t name_hash, bool create);
  // The slot holding (policy id, key), or kNil.
  uint32_t find(uint16_t policy, std::string_view key, uint64_t hash) const;
  // algo::decide on the slot's state, in place (the O(1) states are decided on a local copy
  // of their packed bytes; the log and a state of another algorithm go through the variant).
  Decision decide(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost, algo::Op op);
  // Moves the slot's state out (the slot keeps a placeholder until put_state).
  algo::AlgorithmState take_state(uint32_t i);
  // Stores a state back into the slot.
  void put_state(uint32_t i, algo::AlgorithmState&& state);
  // algo::idle_at_us of the slot's state under its policy's current definition.
  int64_t idle_at(uint32_t i);
  // Records a use for the LRU order.
  void touch(uint32_t i);
  // Forgets the slot (hash: the one it was found or inserted with).
  void remove(uint32_t i, uint64_t hash);
  // Adds a new entry (precondition: find() == kNil; `policy` from policy_id(..., true)),
  // evicting the least recently used entry first when the shard is full.
  void insert(uint16_t policy, std::string_view key, uint64_t hash, algo::AlgorithmState&& state,
              int64_t now_us);
  // Drops every idle entry; returns how many.
  size_t sweep_all(int64_t now_us);

  // Readable without the mutex (relaxed; approximate while others work).
  size_t size() const { return size_mirror_.load(std::memory_order_relaxed); }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }

 private:
  static constexpr unsigned kChunkBits = 6;  // 64 slots (4 KiB) per slab chunk: little slack
  static constexpr uint32_t kChunkMask = (1U << kChunkBits) - 1;
  static constexpr size_t kPolicyPurgeThreshold = 64;

  struct PolicyEntry {
    Policy policy;       // latest definition seen under this name
    uint64_t name_hash;  // hash_field(name, seed)
    uint32_t users;      // live slots with this id; 0 = dead, recycled by purge_policies()
  };

  Slot& slot(uint32_t i) { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  const Slot& slot(uint32_t i) const { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  static const char* key_bytes(const Slot& s) {
    if (s.key_len <= kInlineKeyBytes) return s.key;
    const char* p;
    std::memcpy(&p, s.key, sizeof p);
    return p;
  }
  uint64_t rehash(const Slot& s) const;
  void release_policy(uint16_t id) {
    if (--policies_[id].users == 0) ++policies_dead_;
  }
  void purge_policies();
  void index_policy(uint16_t id);
  void rebuild_policy_index(bool drop_dead);

  void sweep_some(int64_t now_us, size_t n);
  void set_size(size_t n) {
    size_ = n;
    size_mirror_.store(n, std::memory_order_relaxed);
  }

  // Slab.
  uint32_t allocate();
  void release(uint32_t i);
  // LRU list.
  void push_front(uint32_t i);
  void unlink(uint32_t i);
  // Table.
  void table_insert(uint64_t hash, uint32_t i);
  void table_erase(uint64_t hash, uint32_t i);
  void grow_table();

  size_t capacity_ = 1;
  uint64_t seed_ = 0;
  uint32_t sweep_every_ = 0;
  uint32_t sweep_batch_ = 0;
  uint32_t sweep_countdown_ = 0;
  uint32_t mtf_distance_ = 0;  // capacity / 4: see the LRU note at the top
  uint32_t ops_ = 0;           // wraps; only differences are used
  size_t size_ = 0;

  std::vector<std::unique_ptr<Slot[]>> chunks_;
  uint32_t slots_used_ = 0;  // slots ever handed out (the rest of the last chunk is untouched)
  uint32_t free_ = kNil;     // free-list head

  uint32_t head_ = kNil;    // most recently used
  uint32_t tail_ = kNil;    // least recently used
  uint32_t cursor_ = kNil;  // incremental sweep position, walking from tail to head

  std::unique_ptr<uint64_t[]> table_;  // (hash low 32 bits << 32) | (slot + 1); 0 = empty
  size_t table_mask_ = 0;

  std::vector<PolicyEntry> policies_;     // by id
  std::vector<uint16_t> policies_free_;   // recycled ids
  std::unique_ptr<uint16_t[]> policy_index_;  // id + 1 by name hash, linear probing; 0 = empty
  size_t policy_mask_ = 0;
  size_t policies_dead_ = 0;  // entries with users == 0 still indexed

  std::atomic<size_t> size_mirror_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace ratelimit::memory
