// concurrency_interim.h — STAND-IN for the concurrency algorithm that src/core is getting
// (issue 20: algo::decide(policy, ConcurrencyState&, now, cost, op, lease) in
// include/ratelimit/algorithms.h). The simulator needs it now; decision math belongs in
// src/core, so this file is to be deleted when that lands, and throttle.cc's two calls below
// switched to the core function. It implements the same contract, nothing more:
//   acquire: leases whose expiry is <= now free themselves first; admitted when units held +
//            cost <= limit, adding a lease {id, now + lease_ttl, cost}; denied: retry_after =
//            until enough leases expire for it to fit (a cost above the limit: never).
//   release: frees the lease `id` if still held (true), else nothing (false) — an expired or
//            foreign id frees nothing.
// Pure; not thread-safe (one state per key, as in the store).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ratelimit::sim::interim {

struct Lease {
  uint64_t id = 0;
  int64_t expires_us = 0;
  int64_t weight = 1;
};

// Leases in order of expiry (ties by id), as in core's ConcurrencyState.
struct ConcurrencyState {
  std::vector<Lease> leases;
};

struct ConcurrencyDecision {
  bool allowed = false;
  int64_t retry_after_us = 0;  // denied: until it would fit (INT64_MAX: never)
};

inline void drop_expired(ConcurrencyState& s, int64_t now_us) {
  auto live = std::find_if(s.leases.begin(), s.leases.end(),
                           [&](const Lease& e) { return e.expires_us > now_us; });
  s.leases.erase(s.leases.begin(), live);
}

inline ConcurrencyDecision acquire(int64_t limit, int64_t lease_ttl_us, ConcurrencyState& s,
                                   int64_t now_us, int64_t cost, uint64_t id) {
  drop_expired(s, now_us);
  int64_t held = 0;
  for (const Lease& e : s.leases) held += e.weight;
  if (cost > limit) return {false, INT64_MAX};
  if (held + cost <= limit) {
    const Lease e{id, now_us + lease_ttl_us, cost};
    s.leases.insert(std::upper_bound(s.leases.begin(), s.leases.end(), e,
                                     [](const Lease& a, const Lease& b) {
                                       return a.expires_us != b.expires_us ? a.expires_us < b.expires_us
                                                                           : a.id < b.id;
                                     }),
                    e);
    return {true, 0};
  }
  // Walk the leases in expiry order until enough units have freed.
  int64_t freed = 0;
  for (const Lease& e : s.leases) {
    freed += e.weight;
    if (held - freed + cost <= limit) return {false, e.expires_us - now_us};
  }
  return {false, INT64_MAX};
}

inline bool release(ConcurrencyState& s, int64_t now_us, uint64_t id) {
  drop_expired(s, now_us);
  auto it = std::find_if(s.leases.begin(), s.leases.end(), [&](const Lease& e) { return e.id == id; });
  if (it == s.leases.end()) return false;
  s.leases.erase(it);
  return true;
}

}  // namespace ratelimit::sim::interim
