// distributed.h — the simulator's model of many ratelimitd instances sharing one limit: the
// consistency modes exact, lease and async on one shared store, and regions each deciding on
// its own store and exchanging grow-only counts — what each admits against the exact answer
// (over and under, in total and in the worst window), the store calls per decision, and the
// decision latency, on the same request stream as the replay.
//
// Why: "exact counting and low latency are a trade-off" — this puts a number on it for a
// user's own traffic before they choose. Every decision and every store operation is the
// library's (include/ratelimit/consistency.h: reserve, add_hits, decide_local, slice_size,
// and the bounds; algo::decide for exact); this file only moves time, routes requests to
// instances and messages between them, and counts.
// The model (all its parameters in DistributedOptions, one place):
//   - Requests go to instances round-robin (a load balancer); instance i is in region i % R.
//     exact, lease and async share one store in region 0: an instance of another region pays
//     cross_rtt per store call, one in region 0 pays rtt.
//   - exact: one store call per decision, decided at the request's arrival on one state per
//     key — the reference the other modes are compared with; latency rtt (or cross_rtt).
//   - lease and async: each instance holds ratelimitd's per-key state (src/distributed/
//     key_state.cc) and takes its instants from the same core functions (slice_life_us,
//     slice_until_us, slice_demand, lease_recheck_us, next_push_us): the model is the daemon's
//     algorithm, with the store answering at once (distributed_instances.cc).
//   - lease: an instance admits from its slice of the key's current window; otherwise one
//     reserve() call gives back what is left and asks slice_size() units (demand: what it spent
//     of its last slice, per second); latency of such a decision rtt (cross_rtt). A slice is
//     given back when it ends (lease_ttl or its window); a denial on the last view is answered
//     locally until its recheck. The store applies a call at the request's arrival time (its
//     latency delays the answer, not the count).
//   - async: an instance decides with decide_local() on its last view plus its hits not yet in
//     a view (latency 0; a key's first request reads the store first); every sync_interval / 2
//     on the key's own grid it pushes its hits with add_hits() when it has any or the key was
//     used (a call with 0 hits refreshes its view), and the answer — the view that holds them
//     — arrives one round trip later.
//   - regions: RegionStore's semantics (distributed_regions.h): each region's store decides
//     exactly with the limit lowered by what the deciding instance last read of the others;
//     every instance reads each key in use from every other region every sync_interval, the
//     answer merged by max a cross_rtt later. Latency rtt.
// Defined for fixed_window and sliding_window_counter (consistency.h says why not the others).
// Not thread-safe; memory: per key, per instance state for the keys seen in the run.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "distributed_types.h"
#include "replay.h"

namespace ratelimit::sim {

class Distributed {
 public:
  // `fixed` and `counter`: the run's fixed_window and sliding_window_counter policies.
  static Result<Distributed> create(const Policy& fixed, const Policy& counter,
                                    DistributedOptions options);
  Distributed(Distributed&&) noexcept;
  Distributed& operator=(Distributed&&) noexcept;
  ~Distributed();

  // One request, in non-decreasing time order.
  void add(int64_t t_us, std::string_view key, int64_t cost);
  DistributedReport finish();

 private:
  struct Impl;
  explicit Distributed(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::sim
