// sliding_window_log.cc — sliding window log: the admission times of the units in
// (now - W, now]; admitted when their number n + cost <= L.
//
// Exact (no boundary effect), at a memory cost that grows with L: one 16-byte entry per
// admitted request, at most L entries (Policy caps L at kMaxSlidingLogLimit). An entry
// admitted at time a counts until a + W (exclusive), so retry_after is the moment enough of
// the oldest units have left. Mirrored by src/redis/lua/sliding_window_log.lua (a sorted set
// whose members are unique per request).
#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {
namespace {

// Drops entries admitted at or before `t - window`, compacting the vector now and then.
void expire(SlidingWindowLogState& s, int64_t t, int64_t window) {
  auto& e = s.entries;
  while (s.head < e.size() && e[s.head].at_us <= t - window) {
    s.units -= e[s.head].cost;
    ++s.head;
  }
  if (s.head == e.size()) {
    e.clear();
    s.head = 0;
  } else if (s.head >= 32 && s.head * 2 >= e.size()) {
    e.erase(e.begin(), e.begin() + s.head);
    s.head = 0;
  }
}

// Keeps only the newest `limit` units (count-denied mode bounds the log this way).
void trim_to(SlidingWindowLogState& s, int64_t limit) {
  auto& e = s.entries;
  while (s.units > limit) {
    auto& oldest = e[s.head];
    const int64_t excess = s.units - limit;
    if (oldest.cost <= excess) {
      s.units -= oldest.cost;
      ++s.head;
    } else {
      oldest.cost -= excess;
      s.units = limit;
    }
  }
}

}  // namespace

Decision decide(const Policy& policy, SlidingWindowLogState& s, int64_t now_us, int64_t cost,
                Op op) {
  const int64_t limit = policy.limit();
  const int64_t window = policy.window().count();
  const int64_t newest = s.head < s.entries.size() ? s.entries.back().at_us : 0;
  const int64_t t = std::max<int64_t>({now_us, newest, 0});
  // Expiry only forgets what no decision can see any more, so peek may do it too.
  expire(s, t, window);

  Decision d;
  d.limit = limit;
  if (cost > limit) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = limit - s.units;
    d.reset_after = Micros{s.units > 0 ? s.entries.back().at_us + window - t : 0};
    return d;
  }
  if (s.units + cost <= limit) {
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = limit - (s.units + cost);
    d.reset_after = Micros{window};  // the unit admitted now is the last to leave
    if (op == Op::kAcquire) {
      s.entries.push_back({t, cost});
      s.units += cost;
    }
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  if (op == Op::kAcquire && policy.count_denied()) {
    s.entries.push_back({t, cost});
    s.units += cost;
    trim_to(s, limit);
  }
  // The request fits once `need` of the oldest units have left the window.
  const int64_t need = s.units + cost - limit;
  int64_t freed = 0;
  for (size_t i = s.head; i < s.entries.size(); ++i) {
    freed += s.entries[i].cost;
    if (freed >= need) {
      d.retry_after = Micros{s.entries[i].at_us + window - t};
      break;
    }
  }
  d.remaining = limit - s.units;
  d.reset_after = Micros{s.entries.back().at_us + window - t};
  return d;
}

}  // namespace ratelimit::algo
