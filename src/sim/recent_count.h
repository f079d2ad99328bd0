// recent_count.h — the simulator's sliding sum: units admitted within the last `span` µs of
// simulated time, and the most there ever were. The distributed model uses it for a lease's
// recent demand, and for the async and regions bounds (the peak admitted within sync + round
// trip). Internal to src/sim; header-only.
// Invariant: times passed to add() and drop() never decrease (the event queue's order).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>

namespace ratelimit::sim {

struct RecentCount {
  std::deque<std::pair<int64_t, int64_t>> items;  // (time, units)
  int64_t sum = 0, peak = 0;
  void add(int64_t t, int64_t units, int64_t span) {
    items.emplace_back(t, units);
    sum += units;
    drop(t, span);
    peak = std::max(peak, sum);
  }
  // Forgets what is older than `span` at `now`.
  void drop(int64_t now, int64_t span) {
    while (!items.empty() && items.front().first <= now - span) {
      sum -= items.front().second;
      items.pop_front();
    }
  }
};

}  // namespace ratelimit::sim
