// shard_state.cc — a memory Shard's per-slot state: taking a key's state out of its slot and
// putting it back, deciding on the states that are used in place (the sliding log, the
// leases), the bytes a state holds and when it goes idle (see shard.h, slot_state.h).
//
// Why its own file: the state paths touch one slot and know every algorithm's layout; the rest
// of the shard (shard.cc) finds, inserts and evicts slots and knows none.
// Invariants: those of slot_state.h; bytes_ changes by exactly the heap blocks a state gains or
// frees, so the byte bound counts what is held.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "shard.h"
#include "slot_state.h"

namespace ratelimit::memory {
using namespace slot_state;

size_t Shard::log_bytes(const Slot& s) const {
  if (s.tag == kLogTag) return heap_block(log_in(s)->entries.heap_bytes());
  if (s.tag == kLeasesTag) {
    return heap_block(sizeof(ConcurrencyState)) +
           heap_block(leases_in(s)->leases.capacity() * sizeof(algo::LeaseEntry));
  }
  return 0;
}

void Shard::free_state(Slot& s) {
  if (s.tag == kLogTag) {
    sub_bytes(log_bytes(s));
    log_in(s)->~SlidingWindowLogState();
  } else if (s.tag == kLeasesTag) {
    sub_bytes(log_bytes(s));
    box_in(s)->~LeasesBox();
  }
  s.tag = kNoState;
}

Decision Shard::decide_lease(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost,
                             algo::Op op, const LeaseId& lease, const adaptive::ReleaseReport& report) {
  AlgorithmState state = take_state(i);
  const Decision d = algo::decide(policy, state, now_us, cost, op, lease, report);
  put_state(i, std::move(state));
  return d;
}

Decision Shard::decide_log(Slot& s, const Policy& policy, int64_t now_us, int64_t cost,
                           algo::Op op) {
  const size_t before = log_bytes(s);
  const Decision d = algo::decide(policy, *log_in(s), now_us, cost, op);
  set_bytes(bytes_ - before + log_bytes(s));
  return d;
}

Decision Shard::decide_unpacked(uint32_t i, const Policy& policy, int64_t now_us, int64_t cost,
                                algo::Op op) {
  AlgorithmState state = take_state(i);
  const Decision d = algo::decide(policy, state, now_us, cost, op);
  put_state(i, std::move(state));
  return d;
}

AlgorithmState Shard::take_state(uint32_t i) {
  Slot& s = slot(i);
  switch (s.tag) {
    case Shard::tag_of(Algorithm::kFixedWindow):
      return unpack_inline<algo::StateOfT<Algorithm::kFixedWindow>>(s);
    case kLogTag: {
      sub_bytes(log_bytes(s));
      return std::move(*log_in(s));  // leaves an empty queue behind (no block)
    }
    case kLeasesTag: {
      sub_bytes(log_bytes(s));
      ConcurrencyState out = std::move(*leases_in(s));  // leaves an empty vector behind (no block)
      add_bytes(log_bytes(s));                           // the box stays
      return out;
    }
    case Shard::tag_of(Algorithm::kSlidingWindowCounter):
      return unpack_inline<algo::StateOfT<Algorithm::kSlidingWindowCounter>>(s);
    case Shard::tag_of(Algorithm::kTokenBucket):
      return unpack_inline<algo::StateOfT<Algorithm::kTokenBucket>>(s);
    case Shard::tag_of(Algorithm::kLeakyBucket):
      return unpack_inline<algo::StateOfT<Algorithm::kLeakyBucket>>(s);
    default: return AlgorithmState{};
  }
}

template <typename T>
void Shard::put_heap_state(Slot& s, uint8_t tag, T&& state) {
  if (s.tag == tag) {
    sub_bytes(log_bytes(s));
    if constexpr (std::is_same_v<T, SlidingWindowLogState>) *log_in(s) = std::move(state);
    else *leases_in(s) = std::move(state);
  } else {
    free_state(s);
    if constexpr (std::is_same_v<T, SlidingWindowLogState>) new (s.state) T(std::move(state));
    else new (s.state) LeasesBox(std::make_unique<ConcurrencyState>(std::move(state)));
  }
  s.tag = tag;
  add_bytes(log_bytes(s));
}

void Shard::put_state(uint32_t i, AlgorithmState&& state) {
  Slot& s = slot(i);
  const auto tag = static_cast<uint8_t>(state.index());
  if (tag == kLogTag) return put_heap_state(s, tag, std::get<kLogTag>(std::move(state)));
  if (tag == kLeasesTag) return put_heap_state(s, tag, std::get<kLeasesTag>(std::move(state)));
  free_state(s);
  std::visit(
      [&s](auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kPacksInline<T>) std::memcpy(s.state, &v, sizeof v);
      },
      state);
  s.tag = tag;
}

int64_t Shard::idle_at(uint32_t i) {
  Slot& s = slot(i);
  const Policy& policy = policies_[s.policy].policy;
  // A state of another algorithm is left from before the policy was redefined: the next
  // decision replaces it with a fresh one, so it is as good as idle. (idle_at_us must not see
  // it: it assumes the policy's own state type.)
  if (s.tag != tag_of(policy.algorithm())) return std::numeric_limits<int64_t>::min();
  AlgorithmState state = take_state(i);  // a copy, or the log's queue / the leases moved out
  const int64_t t = algo::idle_at_us(policy, state);
  if (owns_heap(s.tag)) put_state(i, std::move(state));
  return t;
}

}  // namespace ratelimit::memory
