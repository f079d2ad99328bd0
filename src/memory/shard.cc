// shard.cc — one MemoryStore shard: slab of slots, open-addressing table, standing lists and
// eviction order, byte count, incremental idle sweep (see shard.h for the design and
// invariants). What a slot's state is and how it is decided in place: shard_state.cc.
#include "shard.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "key_hash.h"
#include "slot_state.h"

namespace ratelimit::memory {
using namespace slot_state;

namespace {

bool kept(std::span<const uint32_t> keep, uint32_t i) {
  return std::find(keep.begin(), keep.end(), i) != keep.end();
}

}  // namespace

Shard::~Shard() {
  for (const List& list : lists_) {
    for (uint32_t i = list.head; i != kNil;) {
      Slot& s = slot(i);
      const uint32_t next = s.next;
      free_state(s);
      if (s.key_len > kInlineKeyBytes) delete[] key_bytes(s);
      i = next;
    }
  }
}

void Shard::init(size_t capacity, size_t byte_share, uint64_t seed, size_t sweep_every,
                 size_t sweep_batch, SaturationChoice when_saturated) {
  capacity_ = capacity < 1 ? 1 : capacity;
  byte_share_ = byte_share;
  seed_ = seed;
  sweep_every_ = static_cast<uint32_t>(std::min<size_t>(sweep_every, 0xffffffffU));
  sweep_batch_ = static_cast<uint32_t>(std::min<size_t>(sweep_batch, 0xffffffffU));
  if (sweep_batch_ == 0) sweep_every_ = 0;
  sweep_countdown_ = sweep_every_;
  mtf_distance_ = static_cast<uint32_t>(std::min<size_t>(capacity_ / 4, kStampMask / 2));
  // Half a cell per key of capacity, at least 16: 12-24 bytes per key once allocated; and half
  // a bucket of 8 marks: 32-64 bytes per key once a flood overflows the cells.
  residue_.init(std::max<size_t>(capacity_ / 2, 16), capacity_ / 2, when_saturated);
  table_mask_ = 15;
  table_ = std::make_unique<uint64_t[]>(table_mask_ + 1);
  policies_.init();
}

void Shard::move_to_front(uint32_t i, uint32_t standing) {
  unlink(i);
  push_front(i, standing);
}

void Shard::remove(uint32_t i, uint64_t hash) {
  table_erase(hash, i);
  unlink(i);
  release(i);
  set_size(size_ - 1);
}

uint32_t Shard::pick_victim(std::span<const uint32_t> keep, int64_t now_us, int64_t& idle) {
  for (const List& list : lists_) {
    uint32_t best = kNil;
    int64_t best_idle = std::numeric_limits<int64_t>::max();
    int seen = 0;
    for (uint32_t i = list.tail; i != kNil && seen < kEvictionSample; i = slot(i).prev) {
      if (kept(keep, i)) continue;
      ++seen;
      const int64_t t = idle_at(i);
      if (t <= now_us) {  // idle: it holds nothing, take it at once
        idle = t;
        return i;
      }
      if (t < best_idle) {  // strictly: ties go to the entry nearest the tail
        best = i;
        best_idle = t;
      }
    }
    if (best != kNil) {
      idle = best_idle;
      return best;
    }
  }
  return kNil;
}

void Shard::make_room(size_t keys, size_t bytes, std::span<const uint32_t> keep,
                      int64_t now_us) {
  while (size_ + keys > capacity_ || bytes_ + bytes > byte_share_) {
    int64_t idle = 0;
    uint32_t victim = pick_victim(keep, now_us, idle);
    if (victim == kNil) {
      // Only the entries in use are left. They stay over the byte share (one entry larger
      // than the share is held alone); the key bound is never exceeded.
      if (size_ + keys <= capacity_) return;
      victim = pick_victim({}, now_us, idle);
    }
    if (idle > now_us) {
      record_residue(victim, now_us);
      auto bump = [](std::atomic<uint64_t>& c) {
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      };
      bump(evicted_[standing(victim)]);
      if (size_ + keys <= capacity_) bump(evicted_for_bytes_);
    }
    remove(victim, rehash(slot(victim)));
  }
}

void Shard::record_residue(uint32_t i, int64_t now_us) {
  Slot& s = slot(i);
  const Policy& policy = policies_[s.policy].policy;
  if (s.tag != tag_of(policy.algorithm())) return;  // as good as idle (idle_at)
  AlgorithmState state = take_state(i);  // a copy, or the log's queue moved out
  residue_.record(rehash(s), policies_[s.policy].name_hash,
                  algo::residue_of(policy, state, now_us), standing(i) != kRoomy, now_us);
  if (s.tag == kLogTag) put_state(i, std::move(state));
  residue_bytes_mirror_.store(residue_.bytes(), std::memory_order_relaxed);
  residue_saturated_.store(residue_.saturated(), std::memory_order_relaxed);
  residue_dropped_.store(residue_.dropped(), std::memory_order_relaxed);
}

uint32_t Shard::insert(uint16_t policy, std::string_view key, uint64_t hash,
                       AlgorithmState&& state, uint32_t standing, int64_t now_us,
                       std::span<const uint32_t> keep) {
  policies_.take(policy);  // before any eviction can make the id look unused
  const size_t key_heap = key.size() > kInlineKeyBytes ? heap_block(key.size()) : 0;
  const auto* log = std::get_if<SlidingWindowLogState>(&state);
  const size_t log_heap = log != nullptr ? heap_block(log->entries.heap_bytes()) : 0;
  make_room(1, kEntryBytes + key_heap + log_heap, keep, now_us);
  const uint32_t i = allocate();
  Slot& s = slot(i);
  s.tag = kNoState;
  put_state(i, std::move(state));
  s.policy = policy;
  s.key_len = static_cast<uint16_t>(key.size());
  if (key.size() <= kInlineKeyBytes) {
    std::memcpy(s.key, key.data(), key.size());
  } else {
    char* p = new char[key.size()];
    std::memcpy(p, key.data(), key.size());
    std::memcpy(s.key, &p, sizeof p);
  }
  add_bytes(kEntryBytes + key_heap);
  push_front(i, standing);
  if ((size_ + 1) * 4 > (table_mask_ + 1) * 3) grow_table();
  table_insert(hash, i);
  set_size(size_ + 1);
  residue_.forget(hash, policies_[policy].name_hash);
  return i;
}

size_t Shard::sweep_all(int64_t now_us) {
  size_t dropped = 0;
  for (const List& list : lists_) {
    for (uint32_t i = list.tail; i != kNil;) {
      const uint32_t toward_head = slot(i).prev;
      if (idle_at(i) <= now_us) {
        remove(i, rehash(slot(i)));
        ++dropped;
      }
      i = toward_head;
    }
  }
  return dropped;
}

void Shard::sweep_some(int64_t now_us, size_t n) {
  // At most one look at each entry per batch (a shard holding one hot key checks it once).
  n = std::min(n, size_);
  for (size_t k = 0; k < n && size_ > 0; ++k) {
    // Past the head of a list (or at the start): the tail of the next non-empty list.
    for (uint32_t tries = 0; cursor_ == kNil && tries < kStandings; ++tries) {
      cursor_list_ = cursor_list_ + 1 == kStandings ? 0 : cursor_list_ + 1;
      cursor_ = lists_[cursor_list_].tail;
    }
    const uint32_t i = cursor_;
    cursor_ = slot(i).prev;
    if (idle_at(i) <= now_us) remove(i, rehash(slot(i)));
  }
}

uint64_t Shard::rehash(const Slot& s) const {
  return key_hash(policies_[s.policy].name_hash, std::string_view(key_bytes(s), s.key_len));
}

uint32_t Shard::allocate() {
  if (free_ != kNil) {
    const uint32_t i = free_;
    free_ = slot(i).next;
    return i;
  }
  if ((slots_used_ >> kChunkBits) == chunks_.size()) {
    chunks_.push_back(std::make_unique_for_overwrite<Slot[]>(size_t{1} << kChunkBits));
  }
  return slots_used_++;
}

void Shard::release(uint32_t i) {
  Slot& s = slot(i);
  sub_bytes(kEntryBytes + (s.key_len > kInlineKeyBytes ? heap_block(s.key_len) : 0));
  free_state(s);
  if (s.key_len > kInlineKeyBytes) delete[] key_bytes(s);
  s.key_len = 0;
  policies_.release(s.policy);
  s.next = free_;
  free_ = i;
}

void Shard::push_front(uint32_t i, uint32_t standing) {
  Slot& s = slot(i);
  List& list = lists_[standing];
  s.stamp = (ops_ & kStampMask) | (standing << kStandingShift);
  s.prev = kNil;
  s.next = list.head;
  if (list.head != kNil) slot(list.head).prev = i;
  list.head = i;
  if (list.tail == kNil) list.tail = i;
}

void Shard::unlink(uint32_t i) {
  Slot& s = slot(i);
  List& list = lists_[s.stamp >> kStandingShift];
  if (cursor_ == i) cursor_ = s.prev;
  if (s.prev != kNil) slot(s.prev).next = s.next; else list.head = s.next;
  if (s.next != kNil) slot(s.next).prev = s.prev; else list.tail = s.prev;
}

void Shard::table_insert(uint64_t hash, uint32_t i) {
  const auto h32 = static_cast<uint32_t>(hash);
  size_t pos = h32 & table_mask_;
  while (table_[pos] != 0) pos = (pos + 1) & table_mask_;
  table_[pos] = (uint64_t{h32} << 32) | (uint64_t{i} + 1);
}

void Shard::table_erase(uint64_t hash, uint32_t i) {
  const uint64_t want = (uint64_t{static_cast<uint32_t>(hash)} << 32) | (uint64_t{i} + 1);
  size_t hole = static_cast<uint32_t>(hash) & table_mask_;
  while (table_[hole] != want) hole = (hole + 1) & table_mask_;
  // Backward shift: pull later cells of the probe run into the hole when their home
  // position allows, so lookups never need tombstones.
  for (size_t j = (hole + 1) & table_mask_; table_[j] != 0; j = (j + 1) & table_mask_) {
    const size_t home = static_cast<uint32_t>(table_[j] >> 32) & table_mask_;
    if (((j - home) & table_mask_) >= ((j - hole) & table_mask_)) {
      table_[hole] = table_[j];
      hole = j;
    }
  }
  table_[hole] = 0;
}

void Shard::grow_table() {
  const size_t old_size = table_mask_ + 1;
  auto old = std::move(table_);
  table_mask_ = old_size * 2 - 1;
  table_ = std::make_unique<uint64_t[]>(table_mask_ + 1);
  for (size_t k = 0; k < old_size; ++k) {
    const uint64_t cell = old[k];
    if (cell == 0) continue;
    size_t pos = static_cast<uint32_t>(cell >> 32) & table_mask_;
    while (table_[pos] != 0) pos = (pos + 1) & table_mask_;
    table_[pos] = cell;
  }
}

}  // namespace ratelimit::memory
