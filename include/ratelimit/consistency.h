// consistency.h — the decision math of the `lease` and `async` consistency modes: what one
// atomic store call does to a shared count (reserve a slice, give one back, add pushed hits),
// how an instance decides locally from what it last learned, how big a slice it asks for, and
// the bounds on how far the result can be from `exact`.
//
// Why here: this is decision math, so it has one home (src/core/consistency.cc). The Redis
// functions (src/redis/lua/distributed.lua) mirror reserve() and add_hits() line for line, the
// shared vectors (tests/vectors/distributed.json) hold the two together, the store decorator
// (include/ratelimit/distributed_store.h) calls decide_local() and slice_size(), and the
// simulator may call every function here to model N instances.
//
// The modes (Policy::consistency(), ConsistencyOptions in policy.h):
//   exact  one atomic store call per decision. Defined for every algorithm.
//   lease  an instance reserves a slice of the limit in one atomic call (reserve(): as many
//          units as the algorithm itself would still admit, at most what was asked), admits
//          locally while the slice lasts, and gives back what it did not use when the slice
//          ends (its lifetime, its window, or the instance stopping). Every unit was reserved
//          through the algorithm's own check, counted as if spent at reservation, and is spent
//          later in the same window; a count only weighs less as time passes, so the units
//          really spent never exceed what the store holds, which never exceeds the limit:
//          lease NEVER over-admits. It under-admits while units sit unused in
//          other instances' slices: at any moment at most (instances − 1) × lease_max units
//          (lease_under_admission_bound), and an instance killed without giving back loses at
//          most its held slices (≤ lease_max per key) until their window ends.
//   async  an instance decides on its last view of the global count plus its own hits not yet
//          pushed (decide_local), and pushes its hits — refreshing its view — twice per
//          sync_interval (add_hits(): a plain addition, so a failed push is re-sent and never
//          lost; a re-sent push that had landed counts twice, erring toward denial). A view is
//          then at most half an interval old and the hits it lacks were pushed at most half an
//          interval before it was read. Over-admission: what the other instances admitted that
//          this one had not yet seen, at most (instances − 1) × rate × (sync_interval + round
//          trip) units,
//          rate being one instance's admission rate (async_over_admission_bound); an instance
//          killed -9 loses its unpushed hits (≤ rate × (sync_interval + round trip)), which
//          can only add over-admission of that size.
// Algorithms: lease and async are defined for fixed_window and sliding_window_counter: their
// state is a count per window, so a slice is a number of units of one window (valid until it
// ends), giving back is a subtraction, a push an addition, and a count only becomes stricter
// as time passes within a window. Not for token_bucket and leaky_bucket: a unit taken from a
// bucket at reservation and spent later shifts admissions in time, so an interval can see
// burst + rate × (interval + lease_ttl) units — the bucket's own definition would be exceeded
// by rate × lease_ttl; and their refill makes a pushed hit's effect depend on when it lands.
// Not for sliding_window_log: its state is one entry per admitted request with its time, which
// neither a slice count nor a pushed total can carry. Not in count-denied or every-hit mode:
// every attempt must reach the store to be counted. (Policy::with_consistency refuses these.)
//
// Conventions as algorithms.h: integer microseconds, a state value-initialised is a key never
// seen, a clock that steps back counts as no time passed. All functions are pure and
// allocation-free; callers serialise access to one state.
#pragma once

#include <cstdint>
#include <span>

#include "ratelimit/algorithms.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"

namespace ratelimit::algo {

// What the shared store answers to reserve() and add_hits(): the global count after the call,
// as the window algorithms see it, and what was granted.
struct SharedView {
  int64_t now_us = 0;           // the store's clock at the call
  int64_t window_start_us = 0;  // start of the window containing now_us
  int64_t prev = 0;             // sliding_window_counter: units of the window before (else 0)
  int64_t curr = 0;             // units counted in the current window (slices held included)
  int64_t granted = 0;          // reserve(): units reserved for the caller (else 0)
  // add_hits(): pushed units the count could not take because it reached the limit — units
  // admitted past the limit, made visible (summed over every push, the window's over-
  // admission for fixed_window). 0 for reserve() and for hits of a window that no longer weighs.
  int64_t dropped = 0;
};

// lease_max of `options` for `policy`: the configured value, or max(1, limit / 20) when 0.
int64_t resolved_lease_max(const Policy& policy);

// One atomic call of a lease: first gives back `give_back` units of window
// `give_back_window_us` (0 units: nothing; a window that has ended takes nothing back — its
// units expired with it; the previous window of a sliding_window_counter does, as its count
// still weighs), then reserves up to `want` units: as many as the algorithm would admit now,
// at most `want` (0: nothing, a read). The reserved units are counted in the current window.
// Preconditions: policy's mode is kLease or kAsync and its algorithm fixed_window or
// sliding_window_counter with a matching state; 0 <= want <= kMaxCost; give_back >= 0.
SharedView reserve(const Policy& policy, FixedWindowState& s, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want);
SharedView reserve(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want);

// One atomic push of async mode: adds `hits` units admitted locally in window `window_us` to
// the shared count (the current window, or the previous one of a sliding_window_counter; hits
// of a window that no longer weighs are dropped: no decision can see them). A count is kept
// at most at the limit — any count from the limit up decides alike — so state stays bounded.
// hits 0 is a read. Preconditions as reserve(); 0 <= hits <= kMaxLimit.
SharedView add_hits(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t window_us,
                    int64_t hits);
SharedView add_hits(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us,
                    int64_t window_us, int64_t hits);

// Dispatch on the policy's algorithm; `state` of another algorithm is replaced by a fresh one.
SharedView reserve(const Policy& policy, AlgorithmState& state, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want);
SharedView add_hits(const Policy& policy, AlgorithmState& state, int64_t now_us,
                    int64_t window_us, int64_t hits);

// Units an instance knows of that its last view does not hold: hits admitted locally and not
// yet in the view (async, units > 0), or units of its slice not yet spent (lease, units < 0:
// counted in the view as if spent, but still free to this instance).
struct LocalUnits {
  int64_t window_us = 0;  // the window they belong to
  int64_t units = 0;
};

// The decision an instance makes locally at `now_us` (its estimate of the store's clock) for
// `cost` units: the algorithm's own decision (a peek) on the state of `view` rolled forward to
// now, with each of `local` applied as add_hits (units > 0) or as a give-back (units < 0)
// would apply it. So reset_after and retry_after follow the algorithm's rules, and units of a
// window that no longer weighs count for nothing, as in the store. Changes nothing.
Decision decide_local(const Policy& policy, const SharedView& view,
                      std::span<const LocalUnits> local, int64_t now_us, int64_t cost);

// How many units a lease asks for: the demand expected over the slice's life, at least `cost`
// and at most resolved_lease_max (a request costing more asks exactly its cost), never more
// than the limit. demand_per_s is this instance's recent admission rate on the key (units/s);
// life_us the time the slice can last (min(lease_ttl, until its window ends)). A quiet
// instance (demand 0) asks for just the request's cost.
int64_t slice_size(const Policy& policy, double demand_per_s, int64_t life_us, int64_t cost);

// When slices end and pushes leave: DistributedStore's per-key state (src/distributed/
// key_state.cc) and the simulator's model (src/sim/distributed.cc) both call these, so the model
// reserves, expires and pushes at the instants the daemon does.
// The life a slice reserved at store time `now_us` is sized for: lease_ttl, cut at the end of
// the window containing now (a slice is units of one window).
int64_t slice_life_us(const Policy& policy, int64_t now_us);
// The store instant at which a slice granted at `now_us` in the window starting
// `window_start_us` stops answering: that window's end or now + lease_ttl, whichever is first.
int64_t slice_until_us(const Policy& policy, int64_t window_start_us, int64_t now_us);
// An instance's demand on a key (units/s) when it asks for its next slice: the units it spent
// of its last slice (granted − left) over the time since that slice arrived (`granted_at_us`;
// `now_us` on the same time base). `previous` (the estimate so far) when no slice was granted
// or no time has passed. Its result is slice_size's demand_per_s.
double slice_demand(double previous, int64_t granted, int64_t left, int64_t granted_at_us,
                    int64_t now_us);
// How long a lease instance answers a denial `d` (decided on its last view) locally before it
// asks the store again: sync_interval, or sooner when the denial ends sooner (its retry_after;
// the window when it has none). Bounds the store calls of a key with nothing left.
int64_t lease_recheck_us(const Policy& policy, const Decision& d);
// The async push cadence: a key in use pushes (refreshing its view) every sync_interval / 2,
// so a view is at most half an interval old when used and what an instance cannot see spans at
// most sync_interval + round trip. Given the push time planned before (`planned_us`; 0 before
// the first) and `now_us`, when the key pushed or was found quiet: the next push time — on the
// same grid while the key is busy (a late wake-up does not delay the next push), a new grid
// from now after a quiet spell of a period or more.
int64_t next_push_us(const Policy& policy, int64_t planned_us, int64_t now_us);

// Bounds, in units per window (docs/distributed.md):
// async: over-admission ≤ (instances − 1) × ⌈rate_per_instance × (sync_interval + rtt)⌉: the
// units the other instances admit within one staleness interval (half-open), rate in units per
// second; never more than (instances − 1) × limit (each instance admits at most the limit on
// its own view).
int64_t async_over_admission_bound(int64_t instances, double rate_per_instance,
                                   Micros sync_interval, Micros round_trip, int64_t limit);
// lease: under-admission ≤ (instances − 1) × lease_max at any moment (units reserved by the
// others and not yet used or given back), never more than the limit.
int64_t lease_under_admission_bound(int64_t instances, const Policy& policy);

}  // namespace ratelimit::algo
