// hit_counting.h — which hits a multi-descriptor request counts when envoyproxy/ratelimit's
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is on.
//
// Why in core: it decides what the counters hold, so it is decision math, and it lives next to
// Policy::fixed_window_every_hit (the counter it steers) rather than in a front-end.
// What envoyproxy/ratelimit does (src/redis/fixed_cache_impl.go, getHitsAddend): it first reads
// every descriptor's count and marks the descriptors whose count + hits would pass their limit;
// then, if none would, every descriptor counts its hits; if some would, only those count their
// hits (they are over the limit and answered OVER_LIMIT), and every other descriptor counts 0
// (a check: answered from its current count). The default (the option off) counts every
// descriptor's hits.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

namespace ratelimit::algo {

// `hits[i]`: descriptor i's hits_addend; `would_exceed[i]` nonzero: a peek at hits[i] denied it.
// Writes the hits to count into `out[i]`. Precondition: the three spans have one size.
void hits_to_count_when_stopping(std::span<const int64_t> hits, std::span<const uint8_t> would_exceed,
                                 std::span<int64_t> out);

}  // namespace ratelimit::algo
