// slot.h — a memory Shard's entry (Slot: one cache line) and the standings eviction orders
// entries by (shard.h has the design). Internal to src/memory.
// Why apart: the slot layout and the standing rule are shared by the shard's files and kept
// together with the static_assert that holds a slot to one cache line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ratelimit/decision.h"

namespace ratelimit::memory {

inline constexpr uint32_t kNil = 0xffffffffU;

inline constexpr uint16_t kNoPolicy = 0xffff;
inline constexpr size_t kInlineKeyBytes = 23;

// What an entry's last acquire left it at; eviction takes the lowest first.
enum Standing : uint32_t {
  kRoomy = 0,      // admitted, half or more of its limit left
  kNearLimit = 1,  // admitted, less than half left
  kDenied = 2,     // denied over its limit (a cost above the whole capacity does not count)
};
inline constexpr uint32_t kStandings = 3;

// The standing after an acquire that answered `d` on an entry standing at `before`. A request
// that could never fit (cost above capacity) says nothing about the key's use: unchanged.
inline uint32_t standing_after(const Decision& d, uint32_t before) {
  if (!d.allowed) return d.reason == DecisionReason::kExceedsCapacity ? before : kDenied;
  return d.remaining * 2 < d.limit ? kNearLimit : kRoomy;
}

// Bytes an entry counts for its slot and its share of the table (8-byte cells at load 3/8 ...
// 3/4: 10.7-21 bytes; 16 on average).
inline constexpr size_t kEntryBytes = 64 + 16;
// Candidates eviction compares, nearest the tail of the chosen list.
inline constexpr int kEvictionSample = 4;

// One key's entry: exactly one cache line.
struct Slot {
  alignas(8) unsigned char state[24];  // packed state; see take_state()/put_state()
  uint32_t prev;                       // list neighbour toward the head (more recent)
  uint32_t next;                       // toward the tail; the free-list link when free
  uint32_t stamp;                      // low 30 bits: ops when last put at the front of its
                                       // list; top 2: its Standing
  uint16_t policy;                     // id in the shard's policy table
  uint16_t key_len;
  uint8_t tag;                         // Shard::tag_of the algorithm of `state`
  char key[kInlineKeyBytes];           // key_len <= 23: the key; else a char* (new char[])
};
static_assert(sizeof(Slot) == 64, "a slot is one cache line");

}  // namespace ratelimit::memory
