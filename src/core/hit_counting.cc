// hit_counting.cc — STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's choice of hits (see
// include/ratelimit/hit_counting.h).
#include "ratelimit/hit_counting.h"

#include <algorithm>
#include <cassert>

namespace ratelimit::algo {

void hits_to_count_when_stopping(std::span<const int64_t> hits, std::span<const uint8_t> would_exceed,
                                 std::span<int64_t> out) {
  assert(hits.size() == would_exceed.size() && hits.size() == out.size());
  const bool any = std::any_of(would_exceed.begin(), would_exceed.end(), [](uint8_t w) { return w != 0; });
  for (size_t i = 0; i < hits.size(); ++i) out[i] = !any || would_exceed[i] != 0 ? hits[i] : 0;
}

}  // namespace ratelimit::algo
