// shard.h — one shard of the MemoryStore: a hash table of compact entries, an LRU list, and
// the incremental idle sweep, all guarded by one mutex. Internal to src/memory.
//
// Why this shape (and not std::unordered_map<std::string, AlgorithmState> + std::list):
//   - entries live in 64-byte slots in chunked slabs (no per-entry allocation, no pointer
//     chasing through nodes); the table is open addressing with linear probing over 8-byte
//     cells holding 32 bits of the hash and the slot index, so a probe rarely touches a slot
//     that does not match, and deletion is a backward shift (no tombstones);
//   - (policy name, key) is stored inline in the slot when the two fit in 16 bytes, so the hot
//     path never builds a std::string;
//   - per-key state is stored packed (16-24 bytes; the sliding log's queue on the heap) and
//     unpacked into an algo::AlgorithmState around each algo::decide call, so the decision
//     math stays in src/core and a redefined policy's state is replaced there;
//   - LRU order is a doubly linked list of slot indices, but an entry is moved to the front
//     only when more than a quarter of the shard's capacity worth of operations happened since
//     it was last put there: a hot key costs no list writes, and an entry touched within the
//     last 3/4 * capacity operations is never at the tail (each operation puts at most one
//     entry in front of it).
// Invariants (with the mutex held): size() <= capacity(); every live slot is in the table
// exactly once and in the list exactly once; a slot's idle_at_us is algo::idle_at_us of its
// state as of its last decision; the sweep cursor is kNil or a live slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "ratelimit/algorithms.h"

namespace ratelimit::memory {

inline constexpr uint32_t kNil = 0xffffffffU;
inline constexpr size_t kInlineIdBytes = 16;  // policy name + key bytes stored in the slot

// One key's entry: exactly one cache line.
struct Slot {
  int64_t idle_at_us;                // algo::idle_at_us of the state; idle when <= now
  alignas(8) unsigned char state[24];  // packed state; see pack()/unpack() in shard.cc
  uint32_t prev;                     // list neighbour toward the head (more recent)
  uint32_t next;                     // toward the tail; the free-list link when free
  uint32_t stamp;                    // shard operation count when last moved to the front
  uint8_t tag;                       // AlgorithmState index of `state`
  uint8_t name_len;                  // policy name bytes, then key bytes
  uint16_t key_len;
  union {
    char bytes[kInlineIdBytes];  // name_len + key_len <= kInlineIdBytes
    char* heap;                  // otherwise: new char[name_len + key_len]
  } id;
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

  // Counts one operation on the shard and runs the incremental sweep when it is due.
  void begin_op(int64_t now_us) {
    ++ops_;
    if (sweep_every_ != 0 && --sweep_countdown_ == 0) {
      sweep_countdown_ = sweep_every_;
      sweep_some(now_us, sweep_batch_);
    }
  }
  // The slot holding (name, key), or kNil.
  uint32_t find(std::string_view name, std::string_view key, uint64_t hash) const;
  // Moves the slot's state out (the slot keeps a placeholder until put_state).
  algo::AlgorithmState take_state(uint32_t i);
  // Stores a state and its idle time back into the slot.
  void put_state(uint32_t i, algo::AlgorithmState&& state, int64_t idle_at_us);
  // Records a use for the LRU order.
  void touch(uint32_t i);
  // Forgets the slot (hash: the one it was found or inserted with).
  void remove(uint32_t i, uint64_t hash);
  // Adds a new entry (precondition: find() == kNil), evicting the least recently used entry
  // first when the shard is full.
  void insert(std::string_view name, std::string_view key, uint64_t hash,
              algo::AlgorithmState&& state, int64_t idle_at_us, int64_t now_us);
  // Drops every idle entry; returns how many.
  size_t sweep_all(int64_t now_us);

  // Readable without the mutex (relaxed; approximate while others work).
  size_t size() const { return size_mirror_.load(std::memory_order_relaxed); }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }

 private:
  static constexpr unsigned kChunkBits = 8;  // 256 slots (16 KiB) per slab chunk
  static constexpr uint32_t kChunkMask = (1U << kChunkBits) - 1;

  Slot& slot(uint32_t i) { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  const Slot& slot(uint32_t i) const { return chunks_[i >> kChunkBits][i & kChunkMask]; }
  static const char* id_bytes(const Slot& s) {
    return s.name_len + s.key_len <= kInlineIdBytes ? s.id.bytes : s.id.heap;
  }
  uint64_t rehash(const Slot& s) const;

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

  std::atomic<size_t> size_mirror_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace ratelimit::memory
