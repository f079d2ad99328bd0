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
// Adaptive policies (Policy::adaptive, issue 30): the limit is the key's learned one
// (s.adaptive, adaptive_limit.h), every lease feeds it exactly one sample — its release, or its
// expiry (a drop, removed with it, so never counted twice); mirrored in concurrency.lua +
// adaptive.lua (one learned limit per key for every instance on a Redis), held equal by
// tests/redis/adaptive_mirror_test.cc.
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

// One lease's round trip as an adaptive sample, at `now_us` (a key's first sample starts from
// initial_limit).
void sample(const adaptive::AdaptiveConfig& c, ConcurrencyState& s, const LeaseEntry& e, int64_t now_us,
            int64_t rtt_us, bool dropped) {
  if (s.adaptive.limit_m == 0) s.adaptive = adaptive::initial_state(c);
  const int64_t rtt = std::clamp<int64_t>(rtt_us, 0, adaptive::kMaxSampleUs);
  adaptive::update_at(c, s.adaptive, {rtt, e.inflight, dropped}, now_us);
  s.adaptive.last_sample_us = now_us;
}

// Frees the leases whose time has come (a prefix: they are in expiry order); under an adaptive
// policy each is a drop whose round trip is its whole life (granted to expired).
void expire(const Policy& policy, ConcurrencyState& s, int64_t now_us) {
  auto& leases = s.leases;
  auto live = std::find_if(leases.begin(), leases.end(),
                           [&](const LeaseEntry& e) { return e.expires_us > now_us; });
  if (const auto& c = policy.adaptive()) {
    for (auto it = leases.begin(); it != live; ++it) sample(*c, s, *it, now_us, it->expires_us - it->granted_us, true);
  }
  leases.erase(leases.begin(), live);
}

}  // namespace

int64_t concurrency_limit(const Policy& policy, const ConcurrencyState& s) {
  const auto& c = policy.adaptive();
  if (!c) return policy.limit();
  if (s.adaptive.limit_m == 0) return c->initial_limit;
  return std::clamp(adaptive::limit(s.adaptive), c->min_limit, c->max_limit);
}

Decision decide(const Policy& policy, ConcurrencyState& s, int64_t now_us, int64_t cost, Op op,
                const LeaseId& lease, const adaptive::ReleaseReport& report) {
  expire(policy, s, now_us);
  auto& leases = s.leases;
  int64_t limit = concurrency_limit(policy, s);
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
        if (const auto& c = policy.adaptive()) {
          sample(*c, s, e, now_us, report.latency_us >= 0 ? report.latency_us : now_us - e.granted_us, report.dropped);
        }
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
          insert_in_order(leases, {lease, now_us + policy.lease_ttl().count(), cost, now_us, held + cost});
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
  if (op == Op::kRelease) {
    limit = concurrency_limit(policy, s);  // this release's sample may have moved it
    d.limit = limit;
  }
  d.remaining = std::max<int64_t>(0, limit - held);
  d.reset_after = Micros{leases.empty() ? 0 : leases.back().expires_us - now_us};
  return d;
}

}  // namespace ratelimit::algo
