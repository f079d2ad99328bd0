// concurrency.cc — the concurrency algorithm: at most `limit` units held at once per key, by
// leases that are released by id or expire after lease_ttl (throttling, nginx limit_conn,
// Netflix concurrency-limits; not a rate).
//
// State: the leases held, in order of expiry (ties: by id) — a prefix of them has expired at
// any `now`, and the ones that free soonest come first, so expiry and retry_after read the
// front. Ownership is the lease id: a release or renew names one, and an id that is not held
// (expired, released before, or never issued under this key) changes nothing — there is no
// "decrement the count" that could free a newer holder's units.
// Invariants after every decide(): every lease has expires_us > now_us (of that call) and
// weight >= 1; ids are distinct; the order above holds; units held may exceed the limit only
// when a policy was redefined with a smaller limit (then remaining is 0 until they expire).
// Mirrored by src/redis/lua/concurrency.lua step by step: the same order (a sorted set scored
// by expiry), the same walk for retry_after, the same answers for every op.
#include <algorithm>

#include "ratelimit/algorithms.h"

namespace ratelimit::algo {
namespace {

bool expires_before(const LeaseEntry& a, const LeaseEntry& b) {
  return a.expires_us != b.expires_us ? a.expires_us < b.expires_us : a.id < b.id;
}

void insert_in_order(std::vector<LeaseEntry>& leases, const LeaseEntry& e) {
  leases.insert(std::upper_bound(leases.begin(), leases.end(), e, expires_before), e);
}

std::vector<LeaseEntry>::iterator find_lease(std::vector<LeaseEntry>& leases, const LeaseId& id) {
  return std::find_if(leases.begin(), leases.end(), [&](const LeaseEntry& e) { return e.id == id; });
}

}  // namespace

Decision decide(const Policy& policy, ConcurrencyState& s, int64_t now_us, int64_t cost, Op op,
                const LeaseId& lease) {
  const int64_t limit = policy.limit();
  auto& leases = s.leases;
  // Leases whose time has come free themselves (a prefix: they are in expiry order).
  auto live = std::find_if(leases.begin(), leases.end(),
                           [&](const LeaseEntry& e) { return e.expires_us > now_us; });
  leases.erase(leases.begin(), live);
  int64_t held = 0;
  for (const LeaseEntry& e : leases) held += e.weight;

  Decision d;
  d.limit = limit;
  switch (op) {
    case Op::kRelease:
    case Op::kRenew: {
      d.lease = lease;
      auto it = find_lease(leases, lease);
      if (it == leases.end()) {
        d.reason = DecisionReason::kLeaseNotHeld;
        break;
      }
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      LeaseEntry e = *it;
      leases.erase(it);
      if (op == Op::kRelease) {
        held -= e.weight;
      } else {
        // Never shortens a lease (a clock stepping back, a policy redefined with a shorter TTL).
        e.expires_us = std::max(e.expires_us, now_us + policy.lease_ttl().count());
        insert_in_order(leases, e);
      }
      break;
    }
    case Op::kReport:  // refused before it gets here (validate_report_cost): records nothing
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      break;
    case Op::kAcquire:
    case Op::kPeek: {
      if (cost > limit) {
        d.reason = DecisionReason::kExceedsCapacity;
        break;
      }
      if (held + cost <= limit) {
        d.allowed = true;
        d.reason = DecisionReason::kWithinLimit;
        if (op == Op::kAcquire) {
          insert_in_order(leases, {lease, now_us + policy.lease_ttl().count(), cost});
          held += cost;
          d.lease = lease;
        }
        break;
      }
      // Denied: wait until enough leases expire (soonest first) for the request to fit.
      d.reason = DecisionReason::kOverLimit;
      int64_t freed = 0;
      for (const LeaseEntry& e : leases) {
        freed += e.weight;
        if (held - freed + cost <= limit) {
          d.retry_after = Micros{e.expires_us - now_us};
          break;
        }
      }
      break;
    }
  }
  d.remaining = std::max<int64_t>(0, limit - held);
  d.reset_after = Micros{leases.empty() ? 0 : leases.back().expires_us - now_us};
  return d;
}

}  // namespace ratelimit::algo
