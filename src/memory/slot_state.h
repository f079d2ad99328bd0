// slot_state.h — how a memory Shard's Slot holds an algorithm's state: the fixed-size states
// packed bytewise into Slot::state, the sliding log and the leases as objects living there
// (they own heap blocks), and the estimate of those blocks' bytes. Internal to src/memory.
//
// Why its own file: the packing is shared by the state paths (shard_state.cc) and the
// eviction and insert paths (shard.cc), and its static_asserts keep the layout honest in one
// place.
// Invariants: Slot::tag is the algo::AlgorithmState variant index (kNoState: nothing stored);
// a state with owns_heap(tag) is a live object in Slot::state, moved and destroyed, never
// copied bytewise; every other state is trivially copyable and fits Slot::state.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <variant>

#include "shard.h"

namespace ratelimit::memory::slot_state {

using algo::AlgorithmState;
using algo::ConcurrencyState;
using algo::SlidingWindowLogState;

// Slot tags are algorithm indices (kAlgorithmTable, = the AlgorithmState alternative). The log
// and the leases own heap blocks: their state object lives in the slot and is moved, never
// copied bytewise.
constexpr uint8_t kLogTag = Shard::tag_of(Algorithm::kSlidingWindowLog);
constexpr uint8_t kLeasesTag = Shard::tag_of(Algorithm::kConcurrency);
constexpr uint8_t kNoState = 0xff;  // a fresh slot: nothing to free
static_assert(kAlgorithmCount < kNoState);

template <typename T>
constexpr bool kPacksInline = std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(Slot::state);

static_assert(kPacksInline<algo::FixedWindowState>);
static_assert(kPacksInline<algo::SlidingWindowCounterState>);
static_assert(kPacksInline<algo::TokenBucketState>);
static_assert(kPacksInline<algo::LeakyBucketState>);
static_assert(std::is_same_v<std::variant_alternative_t<kLogTag, AlgorithmState>,
                             SlidingWindowLogState>);

static_assert(sizeof(SlidingWindowLogState) <= sizeof(Slot::state) &&
              alignof(SlidingWindowLogState) <= 8,
              "the sliding log's state lives in the slot");
static_assert(std::is_same_v<std::variant_alternative_t<kLeasesTag, AlgorithmState>,
                             ConcurrencyState>);
// The leases' state (a vector and an adaptive policy's learned limit) is larger than a slot's
// 24 bytes: the slot holds it boxed, and the box lives as long as the slot holds leases (taking
// the state out moves the contents and leaves the empty box, so a decision allocates nothing).
using LeasesBox = std::unique_ptr<ConcurrencyState>;
static_assert(sizeof(LeasesBox) <= sizeof(Slot::state) && alignof(LeasesBox) <= 8,
              "the leases' box lives in the slot");

inline SlidingWindowLogState* log_in(Slot& s) {
  return std::launder(reinterpret_cast<SlidingWindowLogState*>(s.state));
}
inline const SlidingWindowLogState* log_in(const Slot& s) {
  return std::launder(reinterpret_cast<const SlidingWindowLogState*>(s.state));
}
inline LeasesBox* box_in(Slot& s) { return std::launder(reinterpret_cast<LeasesBox*>(s.state)); }
inline const LeasesBox* box_in(const Slot& s) {
  return std::launder(reinterpret_cast<const LeasesBox*>(s.state));
}
inline ConcurrencyState* leases_in(Slot& s) { return box_in(s)->get(); }
inline const ConcurrencyState* leases_in(const Slot& s) { return box_in(s)->get(); }
inline bool owns_heap(uint8_t tag) { return tag == kLogTag || tag == kLeasesTag; }

template <typename T>
inline AlgorithmState unpack_inline(const Slot& s) {
  T v;
  std::memcpy(&v, s.state, sizeof v);
  return v;
}

// What the allocator takes for a request of n bytes (glibc: the request plus an 8-byte header,
// rounded up to 16, at least 32); 0 for none. An estimate for the byte bound, not a promise.
inline size_t heap_block(size_t n) {
  if (n == 0) return 0;
  return std::max<size_t>(32, (n + 8 + 15) & ~size_t{15});
}

}  // namespace ratelimit::memory::slot_state
